"""Validates the hostcheck role's variables (the host is not read):

    - hostcheck.gpu_hosts.hostcheck_validate:
        hostcheck_enabled: "{{ hostcheck_enabled }}"   # ... every hostcheck_* variable
        number_ranges: "{{ __hostcheck_number_ranges }}"  # ... the role's constants
        validated: "{{ __hostcheck_validation | default({}) }}"
      register: __hostcheck_validation

Two checks run commands on the controller, where this action runs: hostcheck_timer_schedule
with systemd's own parser (`systemd-analyze calendar`, where the controller has it), and
hostcheck_config with hostcheck's own schema (hostcheck_build_python with the checkout or the
prebuilt wheel on PYTHONPATH), so the role refuses what `hostcheck run --config` refuses, with its
message. Where hostcheck cannot be imported there, its keys and sections are checked against
the names hostcheck generated (plugins/plugin_utils/hostcheck_schema.py) and its thresholds on the
host (exit 2). values.numbers: the numeric variables as integers;
values.os_vars: vars/<Distribution>-<major>.yml, <Distribution>.yml, <os_family>-<major>.yml or
<os_family>.yml (the OS packages and python the venv needs). The arguments and values are
documented in plugins/modules/hostcheck_validate.py; the base is
plugins/plugin_utils/role_action.py. What the role does on the host is hostcheck_plan's (after
the roles before it), how it turned out hostcheck_verify's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from typing import ClassVar

from ansible.plugins.filter.core import to_nice_yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_schema import (
    CHECK_IDS,
    CHECK_KEYS,
    CONFIG_KEYS,
    PROFILE_NAMES,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

PATH_VARIABLES = (
    "hostcheck_venv",
    "hostcheck_cache_dir",
    "hostcheck_config_file",
    "hostcheck_report_dir",
    "hostcheck_textfile_dir",
    "hostcheck_dataloader_path",
)
HOST_PATH = re.compile(r"^/[^\s]*[^/\s][^\s]*$")
ABSOLUTE = re.compile(r"^/[^\s]+$")
WHEEL = re.compile(r".*\.whl$")
SYSTEMD_ANALYZE = ("/usr/bin/systemd-analyze", "/bin/systemd-analyze")
PROBE = "hostcheck.gpu_hosts.hostcheck_probe"
# What `hostcheck loop --sweep --write` writes (and what the role removes when switched off).
DATALOADER_KIND = "hostcheck-dataloader-settings"
# The workload keys of the settings file, and the variable that gives each.
WORKLOAD_VARIABLES = {
    "sample": "hostcheck_dataloader_sample",
    "sample_cost_us": "hostcheck_dataloader_sample_cost_us",
    "batch_size": "hostcheck_dataloader_batch_size",
    "step_time_s": "hostcheck_dataloader_step_ms",
    "ranks_per_node": "hostcheck_dataloader_ranks_per_node",
    "dataset_path": "hostcheck_dataloader_dataset_path",
    "max_workers": "hostcheck_dataloader_max_workers",
}
MAX_SWEEP_SECONDS = 600
# Options of hostcheck run the role sets itself, which hostcheck_extra_args must not repeat.
RESERVED_OPTIONS = ("--profile", "--fail-on", "--reuse-measurements", "--record-basis")
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


def is_match(pattern: re.Pattern, value: object) -> bool:
    return isinstance(value, str) and pattern.match(value) is not None


def check_paths(paths: dict) -> None:
    bad = {name: value for name, value in paths.items() if not is_match(HOST_PATH, value)}
    if bad:
        raise Invalid(
            f"{', '.join(bad)}: an absolute path without spaces, not the root, got {to_json(bad)}"
        )


def check_profiles(profile: object, timer_profile: object) -> None:
    for name, value in (("hostcheck_profile", profile), ("hostcheck_timer_profile", timer_profile)):
        if value not in PROFILE_NAMES and not is_match(ABSOLUTE, value):
            raise Invalid(
                f"{name}: one of {', '.join(PROFILE_NAMES)} or the absolute path of a profile "
                f"file on the host, got '{value}'"
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


def config_shape_problem(config: object) -> str:
    """What hostcheck run --config says of a config whose keys or sections are wrong ('' when
    they are right), from the names hostcheck generated: the check of hostcheck_config where
    hostcheck cannot run on the controller (the values are then checked on the host)."""

    def unknown(mapping: Mapping, known: tuple[str, ...], within: str = "") -> str:
        extra = sorted(str(key) for key in mapping if key not in known)
        return f"{within}{extra[0]}: unknown key (known here: {', '.join(known)})" if extra else ""

    def not_a_mapping(key: str, value: object) -> str:
        return "" if isinstance(value, Mapping) else f"{key}: {value!r} is not of type 'object'"

    def section_problem(check_id: str, section: object) -> str:
        return not_a_mapping(check_id, section) or unknown(
            section, CHECK_KEYS[check_id], f"{check_id}."
        )

    if not isinstance(config, Mapping):
        return "hostcheck_config: expected a mapping of keys at the top level"
    checks = config.get("checks", {})
    said = unknown(config, CONFIG_KEYS) or not_a_mapping("(top level)", checks)
    said = said or unknown(checks, CHECK_IDS)
    if not said:
        problems = (section_problem(key, section) for key, section in sorted(checks.items()))
        said = next(filter(None, problems), "")
    return f"hostcheck_config: {said}" if said else ""


def check_extra_args(args: object, reserved: tuple[str, ...] = RESERVED_OPTIONS) -> None:
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


def check_seconds(value: object) -> float:
    """hostcheck_dataloader_seconds: a number of seconds above 0 (fractions allowed)."""
    try:
        seconds = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        seconds = None
    if seconds is None or not 0 < seconds <= MAX_SWEEP_SECONDS:
        raise Invalid(
            f"hostcheck_dataloader_seconds: a number of seconds above 0 and at most "
            f"{MAX_SWEEP_SECONDS} (0.5 is one), got {to_json(value)}"
        )
    return seconds


def check_dataset_path(value: object) -> None:
    if not (value == "" or is_match(HOST_PATH, value)):
        raise Invalid(
            "hostcheck_dataloader_dataset_path: empty (samples made in memory) or the absolute "
            f"path of a folder on the host, without spaces, got {to_json(value)}"
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


def run(
    argv: list[str], stdin: str = "", env: dict | None = None, cwd: str | None = None
) -> tuple[int, str, str, str]:
    """rc, stdout, stderr (trailing newlines cut, as the command module does) and a message."""
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            check=False,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return getattr(exc, "errno", None) or 2, "", "", str(exc)
    message = "non-zero return code" if done.returncode else ""
    return done.returncode, done.stdout.rstrip("\r\n"), done.stderr.rstrip("\r\n"), message


def os_vars_for(os_vars: dict, facts: dict) -> dict:
    if not os_vars:
        raise Invalid(
            f"role hostcheck has no vars for {facts.get('distribution')} "
            f"{facts.get('distribution_major_version')} ({facts.get('os_family')} family): "
            f"add roles/hostcheck/vars/{facts.get('os_family')}.yml"
        )
    return os_vars


# The role's constants (vars/main.yml) the variables are checked against.
CHECKED_AGAINST = {"number_ranges": {"type": "dict", "required": True}}


class ActionModule(RoleAction):
    ROLE = "hostcheck"
    SWITCHED_OFF = "hostcheck is neither installed nor run"
    INTERNAL: ClassVar[dict] = CHECKED_AGAINST

    def read_host(self) -> dict:
        """The hostcheck_probe module's reading of the host (one round trip)."""
        return self.on_host(PROBE, {"read": self.reading["probe"]})

    def unit_dir(self) -> str:
        """Where the timer's units are (the probe reads them there)."""
        return self.reading["probe"]["unit_dir"]

    def wanted_units(self) -> dict | None:
        if not self.arg("hostcheck_timer_enabled"):
            return None
        return dict(self.reading["timer_units"])

    def validate(self) -> dict:
        numbers = {name: self.arg(name) for name in self.arg("number_ranges")}
        check_paths({name: self.arg(name) for name in PATH_VARIABLES})

        venv_python = self.arg("hostcheck_venv_python")
        if not (venv_python == "" or is_match(ABSOLUTE, venv_python)):
            raise Invalid(
                "hostcheck_venv_python: empty (the OS's python) or an absolute path, got "
                f"'{venv_python}'"
            )
        profile = self.arg("hostcheck_profile")
        check_profiles(profile, self.arg("hostcheck_timer_profile"))

        schedule = self.arg("hostcheck_timer_schedule")
        check_schedule(schedule)
        if self.arg("hostcheck_timer_enabled"):
            analyze = next((p for p in SYSTEMD_ANALYZE if os.path.isfile(p)), "")
            if analyze:
                rc, dummy, stderr, msg = run(
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

        config = self.arg("hostcheck_config")
        check_extra_args(self.arg("hostcheck_extra_args"))
        check_pip_packages_before(self.arg("hostcheck_pip_packages_before"))
        check_dataset_path(self.arg("hostcheck_dataloader_dataset_path"))
        check_seconds(self.arg("hostcheck_dataloader_seconds"))
        wheel, source = self.arg("hostcheck_wheel"), self.arg("hostcheck_build_source")
        check_wheel(wheel, source)

        checked_by_hostcheck = False
        if len(config) > 0 and (wheel == "" or WHEEL.match(str(wheel))):
            python = str(self.arg("hostcheck_build_python"))
            base_profile = profile if profile in PROFILE_NAMES else "default"
            checked = os.path.abspath(str(wheel or source))
            # python -c puts its working folder first on sys.path: run in the source or beside
            # the wheel, so that no other hostcheck (a checkout the playbook runs in) stands in
            rc, stdout, stderr, msg = run(
                [python, "-c", CHECK_CONFIG, str(base_profile)],
                stdin=to_nice_yaml(config) + "\n",
                env={**os.environ, "PYTHONPATH": checked},
                cwd=os.path.dirname(checked) if wheel else checked,
            )
            problem = config_problem(python, rc, stdout, stderr, msg)
            if problem:
                raise Invalid(problem)
            checked_by_hostcheck = rc == 0
            if rc == 3:
                self.note(
                    f"hostcheck_config: its keys checked, its values left to the host ({stdout})"
                )
        if not checked_by_hostcheck:
            problem = config_shape_problem(config)
            if problem:
                raise Invalid(problem)
        if not self.enabled():
            return {"numbers": numbers, "os_vars": {}}
        return {"numbers": numbers, "os_vars": os_vars_for(self.os_vars(), self.facts())}
