"""Validates the pillow_simd role's variables, then (read-only) what is at pillow_simd_venv on
the host and its CPU flags, which decide the AVX2 build:

    - hostcheck.gpu_hosts.pillow_simd_validate:
      register: __pillow_simd_validation

values (with pillow_simd_enabled; the host is not read otherwise), which the role's
vars/main.yml names __pillow_simd_<value>:

    cpu_flags      the flags of /proc/cpuinfo ([] where it lists none)
    avx2_build     whether to build with -mavx2
    benchmark      pillow_simd_benchmark as a boolean
    skip_reason    why pillow-simd cannot be built on this host ("" when it can); the rest
                   is there only when it can:
    venv, version  pillow_simd_venv without a trailing /, pillow_simd_version as a string
    cache          pillow_simd_wheel_cache as a real path on the controller ("" for none)
    os_vars        the first of vars/<Distribution>-<major>.yml, <Distribution>.yml,
                   <os_family>-<major>.yml, <os_family>.yml, templated with the facts
    packages_hash  sha1 of the sorted library and extra packages (in the wheel's cache key)
    probe_args     the arguments of files/pillow_simd_helper.py probe for this host

The host is read with one command (HOST_SCRIPT), facts gathered (subset min) if the play did
not; the rest is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import hashlib
import os
import re

from ansible.template import trust_as_template
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    Invalid,
    RoleValidation,
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
OS_VARS = [
    "{distribution}-{distribution_major_version}",
    "{distribution}",
    "{os_family}-{distribution_major_version}",
    "{os_family}",
]


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
        "probe",
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
        key, _, rest = line.partition(":")
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


class ActionModule(RoleValidation):
    SWITCHED_OFF = "PIL in {pillow_simd_venv} left as it is"

    def validate(self) -> dict:
        venv = self.var("pillow_simd_venv")
        avx2 = avx2_choice(
            venv,
            self.var("pillow_simd_version"),
            self.var("pillow_simd_avx2"),
            self.var("pillow_simd_wheel_cache"),
            self.var("pillow_simd_venv_python"),
            self.var("pillow_simd_extra_packages"),
        )
        benchmark = self.var("pillow_simd_benchmark")
        if not self.enabled():
            return {}
        host = str(self._vars.get("inventory_hostname", "the host"))
        pyvenv_cfg = re.sub("/+$", "", venv) + "/pyvenv.cfg"
        out = self.host_command(["sh", "-c", HOST_SCRIPT, "sh", venv, pyvenv_cfg])
        try:
            kind, rc, flags = read_host(out.get("stdout", ""))
        except ValueError:
            raise Invalid(
                f"pillow_simd: reading {venv} and /proc/cpuinfo on {host} failed: "
                f"{out.get('stderr') or out.get('msg') or out.get('stdout')}".strip()
            ) from None
        if rc not in (0, 1):
            raise Invalid(f"pillow_simd: reading the CPU flags of {host} failed (grep exit {rc})")
        values = {**host_values(venv, host, avx2, kind, flags), "benchmark": benchmark}
        facts = self.facts()
        os_vars = self.os_vars(OS_VARS)
        values["skip_reason"] = skip_reason(facts, bool(os_vars), flags)
        if values["skip_reason"]:
            if not self.VERIFIES:
                self.note(f"pillow_simd: skipped on {host}: {values['skip_reason']}")
            return values
        # vars/<OS>.yml name facts in the cache key ("debian-{{ ansible_facts[...] }}")
        templar = self._templar.copy_with_new_env(
            available_variables={**self._vars, "ansible_facts": facts}
        )
        os_vars["__pillow_simd_os_key"] = templar.template(
            trust_as_template(os_vars["__pillow_simd_os_key"])
        )
        return {
            **values,
            **build_values(
                venv,
                self.var("pillow_simd_version"),
                self.var("pillow_simd_venv_python"),
                self.var("pillow_simd_wheel_cache"),
                self.var("pillow_simd_extra_packages"),
                os_vars,
                values["avx2_build"],
            ),
        }
