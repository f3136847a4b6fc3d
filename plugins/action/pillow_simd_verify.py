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

import json
from collections.abc import Mapping
from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.action.pillow_simd_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

AVX2_MIN = 100  # as pillow_simd_build.py --min-avx2: fewer is no AVX2 build
BENCH_SECONDS = "1"

Check = tuple[str | None, str]  # (what is wrong or None, what holds)


def changed_in_this_run(probe_run: object) -> list[str]:
    """What tasks/main.yml's probe found to change in this run (its registered result)."""
    if not isinstance(probe_run, Mapping) or probe_run.get("skipped") or probe_run.get("failed"):
        return []
    try:
        found = json.loads(probe_run.get("stdout") or "{}")
    except ValueError:
        return []
    return list(found.get("drift") or []) if isinstance(found, dict) else []


def benchmark_decision(asked: bool, probe_run: object) -> tuple[bool, str]:
    """Whether to run the resize benchmark, and why (or why not)."""
    if asked:
        return True, "pillow_simd_benchmark is true"
    if changed_in_this_run(probe_run):
        return True, "pillow_simd changed this venv in this run"
    return False, "nothing changed in this run (pillow_simd_benchmark: true runs it)"


def pip_pins(found: dict, venv: str, version: str) -> Check:
    constraint_file = f"{venv}/pillow-simd/constraints.txt"
    pins = [f"pillow=={version}+pillowsimd", f"pillow-simd=={version}"]
    lines = found["constraints"]["lines"]
    config = (found.get("pip_effective") or {}).get("config") or {}
    install = config.get("install.constraint", "")
    global_ = config.get("global.constraint", "")
    site_wide = found["pip_global"]["constraints"]
    holds = (
        all(pin in lines for pin in pins)
        and constraint_file in install.split()
        and constraint_file in global_.split()
        and not set(site_wide) - set(install.split())
    )
    return (
        None
        if holds
        else f"{venv}: the venv's pip does not pin pillow to the placeholder: constraints.txt has "
        f"{lines} (wanted {pins}), pip config list gives install.constraint='{install}' "
        f"global.constraint='{global_}' (wanted {constraint_file} and {site_wide})",
        f"pip in {venv} reads {constraint_file}: {', '.join(pins)}",
    )


def pil_owner(found: dict, venv: str, version: str) -> Check:
    claimants = found["claimants"]
    placeholder = found["placeholder"]
    sidecar = found["sidecar"] or {}
    holds = (
        len(claimants) == 1
        and claimants[0]["name"].lower() == "pillow-simd"
        and claimants[0]["version"] == version
        and placeholder["ok"]
        and found["simd_ok"]
    )
    return (
        None
        if holds
        else f"{venv}: PIL should come from pillow-simd {version} alone, built by this role "
        f"({found['key']}), with the placeholder pillow {placeholder['version']}; found PIL "
        f"installed by {[c['name'] + ' ' + c['version'] for c in claimants]}, pillow "
        f"{[p['version'] for p in found['pillow']]}, _imaging {found['imaging']}, build record "
        f"{found['sidecar']}",
        f"PIL comes from pillow-simd {version} alone (its _imaging matches the wheel built on "
        f"{sidecar.get('built_on', '?')}); pillow is the placeholder {placeholder['version']}",
    )


def pil_runtime(found: dict, venv: str, version: str, benchmark: tuple[bool, str]) -> Check:
    """PIL in a fresh interpreter of the venv; with the benchmark, its resizes per second."""
    measured, why = benchmark
    runtime = found.get("runtime") or {"ok": False, "error": "no venv"}
    features = runtime.get("features") or {}
    holds = (
        runtime["ok"]
        and runtime.get("version") == version
        and runtime.get("imaging") == (found["imaging"] or {}).get("path")
        and runtime.get("libjpeg_turbo")
        and features.get("jpg")
        and features.get("zlib")
        and (not measured or runtime.get("resize_per_s", 0) > 0)
    )
    if not holds:
        return (
            f"{venv}/bin/python: PIL {runtime.get('version', 'not importable')} "
            f"{runtime.get('error', '')} (wanted {version} with libjpeg-turbo): {runtime}",
            "",
        )
    said = f"PIL {runtime['version']} with libjpeg-turbo (libjpeg API {runtime['jpeg_version']})"
    if measured:
        return None, f"{said}: {runtime['resize_per_s']} resizes/s ({runtime['resize_job']}; {why})"
    return None, f"{said}; resize benchmark not run: {why}"


def avx2_build(found: dict, avx2_build: bool, pillow_simd_avx2: object, cpu_avx2: bool) -> Check:
    """The AVX2 choice and count of the build record; the count again with objdump when the
    probe recounted (found["avx2_instructions"]: None where the host has no objdump)."""
    sidecar = found["sidecar"] or {}
    try:
        count = int(sidecar.get("avx2_instructions", -1))
    except (TypeError, ValueError):
        count = -1
    recounted = found.get("avx2_instructions")
    holds = (
        sidecar.get("avx2") == avx2_build
        and (count >= AVX2_MIN) == avx2_build
        and (recounted is None or recounted == count)
    )
    on_disk = (
        f"{recounted} on disk"
        if recounted is not None
        else "no objdump here to recount"
        if "avx2_instructions" in found
        else "not recounted on disk"
    )
    return (
        None
        if holds
        else f"pillow_simd_avx2 {pillow_simd_avx2} wants a build "
        f"{'with' if avx2_build else 'without'} AVX2 (CPU avx2 flag: {cpu_avx2}); the installed "
        f"build has {count} AVX2 ymm instructions by its build record, {on_disk}",
        f"{'AVX2' if avx2_build else 'SSE4 (no AVX2)'} build: {count} AVX2 ymm instructions"
        f"{' (recounted with objdump)' if recounted is not None else ''}; CPU avx2 flag: "
        f"{cpu_avx2}",
    )


def hostcheck_pillow(found: dict, venv: str) -> Check:
    run = found.get("hostcheck")
    if run is None:
        return None, f"no hostcheck in {venv}: its pillow check not run"
    if run["rc"] != 0:
        return f"{venv}/bin/hostcheck run --check pillow exits {run['rc']}: {run['output']}", ""
    return None, "hostcheck's pillow check passes"


def verify_found(found: dict, wanted: dict) -> list[str]:
    """What the probe found against `wanted` (venv, version, avx2_build,
    pillow_simd_avx2, cpu_avx2, benchmark: (run it, why)): the lines that hold, or Invalid
    naming every mismatch."""
    venv, version = wanted["venv"], wanted["version"]
    checks = [
        pip_pins(found, venv, version),
        pil_owner(found, venv, version),
        pil_runtime(found, venv, version, wanted["benchmark"]),
        avx2_build(found, wanted["avx2_build"], wanted["pillow_simd_avx2"], wanted["cpu_avx2"]),
        hostcheck_pillow(found, venv),
    ]
    problems = [problem for problem, dummy in checks if problem]
    if problems:
        raise Invalid("; ".join(problems))
    return [holds for dummy, holds in checks]


def read_probe(out: dict, venv: str, host: str) -> dict:
    """The probe's JSON from the command's result; Invalid with its message when it failed."""
    try:
        found = json.loads(out.get("stdout") or "")
    except ValueError:
        found = None
    if out.get("rc") != 0 or not isinstance(found, dict) or found.get("failed"):
        said = (found or {}).get("msg") if isinstance(found, dict) else None
        raise Invalid(
            f"pillow_simd: reading {venv} on {host} failed: "
            f"{said or out.get('stderr') or out.get('msg') or out.get('stdout')}".strip()
        )
    return found


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
