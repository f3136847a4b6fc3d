"""Validates the hostcheck role's variables (the host is not read):

    - hostcheck.gpu_hosts.hostcheck_validate:
      register: __hostcheck_validation

Two checks run commands on the controller, where this action runs: hostcheck_timer_schedule
with systemd's own parser (`systemd-analyze calendar`, where the controller has it), and the
thresholds in hostcheck_config with hostcheck's own schema (hostcheck_build_python with the
checkout or the prebuilt wheel on PYTHONPATH; skipped when hostcheck cannot be imported there:
the host still checks them, exit 2). values.numbers: the numeric variables as integers. The rest
is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping

from ansible.plugins.filter.core import to_nice_yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.filter.numbers import numbers_in_range
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    Invalid,
    RoleValidation,
)

PATH_VARIABLES = (
    "hostcheck_venv",
    "hostcheck_cache_dir",
    "hostcheck_config_file",
    "hostcheck_report_dir",
    "hostcheck_textfile_dir",
)
HOST_PATH = re.compile(r"^/[^\s]*[^/\s][^\s]*$")
ABSOLUTE = re.compile(r"^/[^\s]+$")
WHEEL = re.compile(r".*\.whl$")
SYSTEMD_ANALYZE = ("/usr/bin/systemd-analyze", "/bin/systemd-analyze")
# Run by hostcheck_build_python: exit 3 when hostcheck cannot run there (the check is skipped).
CHECK_CONFIG = """\
import contextlib, io, sys
try:
    from hostcheck.cli import main
except ImportError as exc:
    print(f"hostcheck cannot run on the controller: {exc}")
    sys.exit(3)
err = io.StringIO()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    code = main(["list", "--profile", sys.argv[1], "--config", "/dev/stdin"])
print(err.getvalue().strip())
sys.exit(code)
"""


def to_json(value: object) -> str:
    return json.dumps(value, default=str)


def truthy(value: object) -> bool:
    """Ansible's bool filter."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("yes", "on", "1", "true", "1.0")


def is_match(pattern: re.Pattern, value: object) -> bool:
    return isinstance(value, str) and pattern.match(value) is not None


def check_paths(paths: dict) -> None:
    bad = {name: value for name, value in paths.items() if not is_match(HOST_PATH, value)}
    if bad:
        raise Invalid(
            f"{', '.join(bad)}: an absolute path without spaces, not the root, got {to_json(bad)}"
        )


def check_profiles(profile: object, timer_profile: object, builtin: list[str]) -> None:
    for name, value in (("hostcheck_profile", profile), ("hostcheck_timer_profile", timer_profile)):
        if value not in builtin and not is_match(ABSOLUTE, value):
            raise Invalid(
                f"{name}: one of {', '.join(builtin)} or the absolute path of a profile file on "
                f"the host, got '{value}'"
            )


def check_schedule(schedule: object) -> None:
    if not (isinstance(schedule, str) and schedule.strip() and not re.search(r"[\n\r]", schedule)):
        raise Invalid(
            "hostcheck_timer_schedule: a systemd OnCalendar= expression on one line, e.g. "
            f"'*:0/15' or 'hourly', got {to_json(schedule)}"
        )


def calendar_problem(schedule: str, rc: int, stderr: str) -> str:
    """'' when systemd-analyze calendar accepted the schedule, else the message."""
    if rc == 0:
        return ""
    return (
        f"hostcheck_timer_schedule: systemd-analyze calendar rejects {to_json(schedule)}: "
        f"{stderr.strip()}"
    )


def check_config(config: object, keys: list[str], check_ids: list[str]) -> None:
    checks = config.get("checks", {}) if isinstance(config, Mapping) else None
    if not (
        isinstance(config, Mapping)
        and set(config) <= set(keys)
        and isinstance(checks, Mapping)
        and set(checks) <= set(check_ids)
        and all(isinstance(value, Mapping) for value in checks.values())
    ):
        raise Invalid(
            f"hostcheck_config: a mapping with keys among {', '.join(keys)}, its checks a "
            f"mapping of check ids ({', '.join(check_ids)}) to mappings of thresholds, got "
            f"{to_json(config)}"
        )


def check_extra_args(args: object, reserved: list[str]) -> None:
    ok = isinstance(args, list) and all(isinstance(arg, str) for arg in args)
    if ok and (
        any(re.match(r"^-\S*\s", arg) for arg in args)
        or any(re.sub(r"=.*$", "", arg) in reserved for arg in args)
        or any(re.match(r"^(--report=)?[a-z]+:-$", arg) for arg in args)
    ):
        ok = False
    if not ok:
        raise Invalid(
            "hostcheck_extra_args: one argument per item ([--user, trainer]), without "
            f"{' or '.join(reserved)} (use hostcheck_profile, hostcheck_fail_on and "
            "hostcheck_measure) and without a report to standard output (the role reads that "
            f"one), got {to_json(args)}"
        )


def check_pip_packages_before(packages: object) -> None:
    if not isinstance(packages, list) or any(
        not isinstance(item, str) or re.match(r"^\s*$", item) for item in packages
    ):
        raise Invalid(
            "hostcheck_pip_packages_before: a list of pip requirements such as torch==2.13.0, "
            f"got {to_json(packages)}"
        )


def check_wheel(wheel: object, build_source: object) -> None:
    """hostcheck_wheel: "" (built from hostcheck_build_source), a .whl on the controller, or a
    pip requirement."""
    wheel, source = str(wheel), str(build_source)
    if (
        (wheel == "" and source != "" and os.path.isfile(f"{source}/pyproject.toml"))
        or (WHEEL.match(wheel) and os.path.isfile(wheel))
        or (re.match(r"^[A-Za-z0-9]", wheel) and not WHEEL.match(wheel))
    ):
        return
    if WHEEL.match(wheel):
        raise Invalid(f"hostcheck_wheel: no such wheel on the controller: {wheel}")
    if wheel == "" and source != "":
        raise Invalid(
            f"hostcheck_build_source: no pyproject.toml in {source} (hostcheck_wheel is empty, "
            "so the wheel is built from it)"
        )
    if wheel == "":
        raise Invalid(
            "hostcheck_wheel is empty and hostcheck_build_source names no checkout to build it from"
        )
    raise Invalid(
        "hostcheck_wheel: empty, a controller path ending in .whl, or a pip requirement, "
        f"got {wheel}"
    )


def config_problem(python: str, rc: int, stdout: str, stderr: str, msg: str) -> str:
    """'' when hostcheck's schema accepted hostcheck_config (0) or could not run here (3)."""
    if rc in (0, 3):
        return ""
    said = re.sub(r"^(hostcheck: error: )?(/dev/stdin: )?", "", stdout)
    if not said:
        said = (
            f"checking it with hostcheck on the controller ({python}) ended with exit {rc}: "
            f"{' / '.join(stderr.splitlines()[-3:]) or msg or 'no message'}"
        )
    return f"hostcheck_config: {said}"


def run(argv: list[str], stdin: str = "", env: dict | None = None) -> tuple[int, str, str, str]:
    """rc, stdout, stderr (trailing newlines cut, as the command module does) and a message."""
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return getattr(exc, "errno", None) or 2, "", "", str(exc)
    message = "non-zero return code" if done.returncode else ""
    return done.returncode, done.stdout.rstrip("\r\n"), done.stderr.rstrip("\r\n"), message


class ActionModule(RoleValidation):
    def validate(self) -> dict:
        ranges = self.value("__hostcheck_number_ranges")
        numbers = numbers_in_range({name: self.var(name) for name in ranges}, ranges)
        check_paths({name: self.var(name) for name in PATH_VARIABLES})

        venv_python = self.var("hostcheck_venv_python")
        if not (venv_python == "" or is_match(ABSOLUTE, venv_python)):
            raise Invalid(
                "hostcheck_venv_python: empty (the OS's python) or an absolute path, got "
                f"'{venv_python}'"
            )
        builtin = list(self.value("__hostcheck_builtin_profiles"))
        profile = self.var("hostcheck_profile")
        check_profiles(profile, self.var("hostcheck_timer_profile"), builtin)

        schedule = self.var("hostcheck_timer_schedule")
        check_schedule(schedule)
        if truthy(self.var("hostcheck_timer_enabled")):
            analyze = next((p for p in SYSTEMD_ANALYZE if os.path.isfile(p)), "")
            if analyze:
                rc, _, stderr, msg = run(
                    [analyze, "calendar", "--", schedule], env={**os.environ, "LC_ALL": "C"}
                )
                problem = calendar_problem(schedule, rc, stderr or ("" if rc == 0 else msg))
                if problem:
                    raise Invalid(problem)
            else:
                self.note(
                    "hostcheck_timer_schedule: not checked with systemd-analyze calendar "
                    "(none on the controller)"
                )

        fail_on = self.var("hostcheck_fail_on")
        if fail_on not in ("fail", "warn"):
            raise Invalid(f"hostcheck_fail_on: fail or warn, got '{fail_on}'")
        config = self.var("hostcheck_config")
        check_config(
            config,
            list(self.value("__hostcheck_config_keys")),
            list(self.value("__hostcheck_check_ids")),
        )
        check_extra_args(
            self.var("hostcheck_extra_args"), list(self.value("__hostcheck_reserved_args"))
        )
        check_pip_packages_before(self.var("hostcheck_pip_packages_before"))
        wheel, source = self.var("hostcheck_wheel"), self.var("hostcheck_build_source")
        check_wheel(wheel, source)

        if len(config) > 0 and (wheel == "" or WHEEL.match(str(wheel))):
            python = str(self.var("hostcheck_build_python"))
            base_profile = profile if profile in builtin else "default"
            rc, stdout, stderr, msg = run(
                [python, "-c", CHECK_CONFIG, str(base_profile)],
                stdin=to_nice_yaml(config) + "\n",
                env={**os.environ, "PYTHONPATH": str(wheel or source)},
            )
            problem = config_problem(python, rc, stdout, stderr, msg)
            if problem:
                raise Invalid(problem)
            if rc == 3:
                self.note(f"hostcheck_config: not checked on the controller: {stdout}")
        return {"numbers": numbers}
