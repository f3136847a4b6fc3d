"""The pillow_simd role's decisions: its variables checked, then (read-only, one command) what
is at pillow_simd_venv on the host and its CPU flags, which decide the AVX2 build; the per-OS
package lists and cache key (os_vars()) and the inputs of files/pillow_simd_probe.py.

    - hostcheck.gpu_hosts.pillow_simd_validate:
        pillow_simd_venv: "{{ pillow_simd_venv }}"   # ... every pillow_simd_* variable
        validated: "{{ __pillow_simd_validation | default({}) }}"
      register: __pillow_simd_validation

The values returned, which the role's vars/main.yml names __pillow_simd_<value>, are documented
in plugins/modules/pillow_simd_validate.py. The base is plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

import hashlib
import os
import re
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


class ActionModule(RoleAction):
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
