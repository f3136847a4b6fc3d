"""Verifies the pillow_simd role in one task, reading the host once:

    - hostcheck.gpu_hosts.pillow_simd_verify:   # the arguments of pillow_simd_validate, and
        probe_run: "{{ __pillow_simd_probe_run | default(omit) }}"

Validates first (the run's earlier validation is reused), then runs the role's
files/pillow_simd_probe.py `--runtime --hostcheck` on the host (one command, the probe after
pillow_simd_common.py on its standard input) and compares what it found with the validated values:

    pip      the venv's constraints.txt pins the placeholder pillow and pillow-simd, and pip in
             the venv reads it (pip config list), beside the global constraint files
    owner    PIL comes from pillow-simd of pillow_simd_version alone, its _imaging the one of
             the wheel the role built, and pillow is the placeholder
    runtime  PIL imported in a fresh interpreter of the venv: the version, that _imaging,
             libjpeg-turbo, JPEG and zlib
    avx2     the build record's AVX2 choice and count agree with pillow_simd_avx2
    hostcheck  hostcheck's pillow check in the venv passes (when hostcheck is there)

The resize benchmark (and a recount of the AVX2 instructions with objdump) runs only when
pillow_simd_benchmark is true or this role's probe in tasks/main.yml (probe_run, its registered
result) found something to change in this run; the message says when it did not run, and why.
Nothing fails for a host the role skips (its validation says why). Documented in
plugins/modules/pillow_simd_verify.py.
"""

from __future__ import annotations

from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.pillow_simd_rules import (
    BENCH_SECONDS,
    Validation,
    benchmark_decision,
    read_probe,
    verify_found,
)


class ActionModule(Validation):
    VERIFIES = True
    INTERNAL: ClassVar[dict] = {
        **Validation.INTERNAL,
        "probe_run": {"type": "dict", "default": {}},
    }
    READING = ("probe_run",)

    def verify(self, values: dict) -> list[str]:
        if values["skip_reason"]:
            return [f"pillow_simd: not verified on {self.host}: {values['skip_reason']}"]
        benchmark = benchmark_decision(values["benchmark"], self.reading["probe_run"])
        measured = benchmark[0]
        argv = [
            "python3", "-", *values["probe_args"], "--runtime", "--hostcheck",
            "--bench-seconds", BENCH_SECONDS if measured else "0",
            *(["--recount"] if measured else []),
        ]  # fmt: skip
        program = self.role_file("pillow_simd_common.py") + self.role_file("pillow_simd_probe.py")
        out = self.host_command(argv, stdin=program)
        found = read_probe(out, values["venv"], self.host)
        return verify_found(
            found,
            {
                "venv": values["venv"],
                "version": values["version"],
                "avx2_build": values["avx2_build"],
                "pillow_simd_avx2": self.arg("pillow_simd_avx2"),
                "cpu_avx2": "avx2" in values["cpu_flags"],
                "benchmark": benchmark,
            },
        )
