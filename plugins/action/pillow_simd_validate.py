"""Validates the pillow_simd role's variables, then (read-only) what is at pillow_simd_venv on
the host and its CPU flags, which decide the AVX2 build:

    - hostcheck.gpu_hosts.pillow_simd_validate:
      register: __pillow_simd_validation

values (with pillow_simd_enabled; the host is not read otherwise): cpu_flags, the flags of
/proc/cpuinfo ([] where it lists none), and avx2_build, whether to build with -mavx2; the
role's vars/main.yml names them __pillow_simd_cpu_flags and __pillow_simd_avx2_build. The host
is read with one command (HOST_SCRIPT); the rest is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import re

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
        return host_values(venv, host, avx2, kind, flags)
