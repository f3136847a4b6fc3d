"""The pillow_simd role's decisions, for its validate and verify actions: its variables checked,
what is at pillow_simd_venv and the host's CPU flags (read once, read-only), which decide the
AVX2 build; the per-OS package lists and cache key; the inputs of files/pillow_simd_probe.py;
and what verify compares. Validation is the validate action and the verify action's base."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

VENV = re.compile(r"^(/[A-Za-z0-9_.+@-]+)+/?$")
DOT_PART = re.compile(r"(^|/)\.\.?(/|$)")
VERSION = re.compile(
    r"^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
    r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$"
)
VENV_PYTHON = re.compile(r"^[A-Za-z0-9_./+-]+$")
PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:-]*$")
# What is at pillow_simd_venv ($1; $2 its pyvenv.cfg), then the flags line of /proc/cpuinfo and
# grep's exit (1: no flags line, which is no error). A symlink is judged by what it points at.
HOST_SCRIPT = """\
if [ -d "$1" ]; then
  if [ -e "$2" ] || [ -L "$2" ]; then kind=venv
  elif [ -n "$(ls -A -- "$1" 2>/dev/null | head -n 1)" ]; then kind=full
  else kind=empty; fi
elif [ -L "$1" ] && [ ! -e "$1" ]; then kind=dangling
elif [ -e "$1" ] || [ -L "$1" ]; then kind=file
else kind=missing; fi
echo "venv:$kind"
flags=$(grep -m1 -E '^flags[[:space:]]*:' /proc/cpuinfo)
echo "grep:$?"
echo "flags:$flags"
"""
KINDS = ("venv", "full", "empty", "dangling", "file", "missing")


def avx2_choice(
    venv: object,
    version: object,
    avx2: object,
    wheel_cache: object,
    venv_python: object,
    extra_packages: object,
) -> str:
    """The variables' own checks; returns pillow_simd_avx2 as auto, true or false."""
    if not isinstance(venv, str) or not VENV.match(venv) or DOT_PART.search(venv):
        raise Invalid(
            "pillow_simd_venv: an absolute path of plain names (letters, digits, . _ + @ -; "
            "no . or .. parts, no blanks: pip.conf lists constraint files separated by "
            f"blanks), got '{venv}'"
        )
    if not VERSION.match(str(version)):
        raise Invalid(
            "pillow_simd_version: one exact release such as 12.1.1.post0 (`pip index versions "
            f"pillow-simd` lists them), not a range or a name, got '{version}'"
        )
    word = str(avx2).lower()
    if word not in ("auto", "true", "false"):
        raise Invalid(f"pillow_simd_avx2: auto, true or false, got '{avx2}'")
    if not (
        isinstance(wheel_cache, str)
        and (wheel_cache == "" or wheel_cache.startswith("/"))
        and isinstance(venv_python, str)
        and VENV_PYTHON.match(venv_python)
        and isinstance(extra_packages, (list, tuple))
        and all(isinstance(name, str) and PACKAGE.match(name) for name in extra_packages)
    ):
        shown = (
            list(extra_packages) if isinstance(extra_packages, (list, tuple)) else extra_packages
        )
        raise Invalid(
            f'pillow_simd_wheel_cache must be "" or an absolute controller path (got '
            f"'{wheel_cache}'), pillow_simd_venv_python a command name or path (got "
            f"'{venv_python}'), pillow_simd_extra_packages a list of package names (got "
            f"{plain(shown)})"
        )
    return word


def skip_reason(facts: dict, has_os_vars: bool, flags: list[str]) -> str:
    """Why pillow-simd cannot be built on this host; "" when it can."""
    if not has_os_vars:
        return f"no package list for {facts.get('distribution')} in roles/pillow_simd/vars"
    if facts.get("architecture") != "x86_64":
        return (
            "pillow-simd is x86-64 only (its build passes -msse4); this host is "
            f"{facts.get('architecture')}"
        )
    if "sse4_1" not in flags:
        return "this CPU has no SSE4.1, which every pillow-simd build needs"
    return ""


def os_key(os_vars: dict) -> str:
    """The OS part of the wheel's cache key: vars/<OS>.yml's __pillow_simd_os_key (its {fact}
    fields filled in) in lower case, as rocky-9 for {distribution}-{distribution_major_version}."""
    return os_vars["__pillow_simd_os_key"].lower()


def build_values(
    venv: str,
    version: object,
    venv_python: str,
    wheel_cache: str,
    extra_packages: list[str],
    os_vars: dict,
    avx2_build: bool,
) -> dict:
    """The venv path, version and build inputs the tasks and the probe use."""
    venv = venv.rstrip("/")
    # sorted as Jinja's sort sorts (case-insensitively): the cache keys of wheels built before
    packages = sorted([*os_vars["__pillow_simd_library_packages"], *extra_packages], key=str.lower)
    packages_hash = hashlib.sha1(" ".join(packages).encode()).hexdigest()
    probe_args = [
        "--venv", venv,
        "--venv-python", venv_python,
        "--version", str(version),
        "--avx2", "yes" if avx2_build else "no",
        "--os-key", os_vars["__pillow_simd_os_key"],
        "--packages-hash", packages_hash,
    ]  # fmt: skip
    return {
        "venv": venv,
        "version": str(version),
        "cache": os.path.realpath(wheel_cache) if wheel_cache else "",
        "os_vars": os_vars,
        "packages_hash": packages_hash,
        "probe_args": probe_args,
    }


def plain(value: object) -> object:
    """Strings as str (Ansible's tagged strings show the same), for messages."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    return value


def read_host(stdout: str) -> tuple[str, int, list[str]]:
    """HOST_SCRIPT's output: what is at the venv, grep's exit, and the CPU flags."""
    found = {}
    for line in stdout.splitlines():
        key, dummy, rest = line.partition(":")
        found.setdefault(key, rest)
    kind, rc = found.get("venv"), found.get("grep", "")
    if kind not in KINDS or not rc.isdigit():
        raise ValueError(stdout)
    flags = found.get("flags", "").split(":", 1)[-1].split() if rc == "0" else []
    return kind, int(rc), flags


def host_values(venv: str, host: str, avx2: str, kind: str, flags: list[str]) -> dict:
    """The checks of what the host has, and the values the role's tasks use."""
    if kind in ("full", "dangling", "file"):
        raise Invalid(
            f"pillow_simd_venv: {venv} on {host} is "
            + (
                "a directory with files but no pyvenv.cfg (not a virtual environment); "
                "refusing to create one over it"
                if kind == "full"
                else f"not a directory (a {'symlink to nowhere' if kind == 'dangling' else 'file'})"
            )
        )
    if avx2 == "true" and "avx2" not in flags:
        raise Invalid(
            f"pillow_simd_avx2: true, but /proc/cpuinfo of {host} lists no avx2 flag: a build "
            "with -mavx2 dies with SIGILL on this CPU; set auto or false"
        )
    return {
        "cpu_flags": flags,
        "avx2_build": avx2 == "true" or (avx2 == "auto" and "avx2" in flags),
    }


class Validation(RoleAction):
    ROLE = "pillow_simd"
    INTERNAL: ClassVar[dict] = {"number_ranges": {"type": "dict", "required": True}}
    SWITCHED_OFF = "PIL in {pillow_simd_venv} left as it is"

    def validate(self) -> dict:
        venv = self.arg("pillow_simd_venv")
        avx2 = avx2_choice(
            venv,
            self.arg("pillow_simd_version"),
            self.arg("pillow_simd_avx2"),
            self.arg("pillow_simd_wheel_cache"),
            self.arg("pillow_simd_venv_python"),
            self.arg("pillow_simd_extra_packages"),
        )
        if not self.enabled():
            return {}
        kind, flags = self.read_venv_and_flags(venv)
        values = {
            **host_values(venv, self.host, avx2, kind, flags),
            "benchmark": self.arg("pillow_simd_benchmark"),
        }
        os_vars = self.os_vars()
        values["skip_reason"] = skip_reason(self.facts(), bool(os_vars), flags)
        if values["skip_reason"]:
            if not self.VERIFIES:
                self.note(f"pillow_simd: skipped on {self.host}: {values['skip_reason']}")
            return values
        os_vars["__pillow_simd_os_key"] = os_key(os_vars)
        return {
            **values,
            **build_values(
                venv,
                self.arg("pillow_simd_version"),
                self.arg("pillow_simd_venv_python"),
                self.arg("pillow_simd_wheel_cache"),
                self.arg("pillow_simd_extra_packages"),
                os_vars,
                values["avx2_build"],
            ),
        }

    def read_venv_and_flags(self, venv: str) -> tuple[str, list[str]]:
        """HOST_SCRIPT on the host: what is at the venv, and the CPU flags."""
        pyvenv_cfg = re.sub("/+$", "", venv) + "/pyvenv.cfg"
        out = self.host_command(["sh", "-c", HOST_SCRIPT, "sh", venv, pyvenv_cfg])
        try:
            kind, rc, flags = read_host(out.get("stdout", ""))
        except ValueError:
            raise Invalid(
                f"pillow_simd: reading {venv} and /proc/cpuinfo on {self.host} failed: "
                f"{out.get('stderr') or out.get('msg') or out.get('stdout')}".strip()
            ) from None
        if rc not in (0, 1):
            raise Invalid(
                f"pillow_simd: reading the CPU flags of {self.host} failed (grep exit {rc})"
            )
        return kind, flags


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
