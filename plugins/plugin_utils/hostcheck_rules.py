"""The hostcheck role's decisions, for its validate, plan and verify actions: hostcheck_config
against hostcheck's own schema (or, where hostcheck cannot be imported on the controller, its
generated names: plugins/plugin_utils/hostcheck_schema.py), the numeric variables, the timer's
schedule; from what hostcheck_probe read, what install, config, timer and the DataLoader
settings file must change and why hostcheck must run (plan); and how it turned out (verify).
Validation is the validate action and the base of the other two."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from typing import ClassVar

import yaml
from ansible import constants
from ansible.plugins.filter.core import to_nice_yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataloader_workload import (
    ranks_per_node,
    sweep_max_workers,
)
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
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.systemd_quoting import (
    systemd_split,
)
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

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


def run_once_per_run(
    argv: list[str], stdin: str = "", env: dict | None = None, cwd: str | None = None
) -> tuple[int, str, str, str]:
    """run(), once per ansible-playbook run for the same command, input, environment and folder:
    the run's workers (a fork per host) share the answer through a file in the run's own
    temporary folder, under a lock, so the hosts of one hostcheck_config ask hostcheck once."""
    asked = json.dumps([argv, stdin, sorted((env or os.environ).items()), cwd])
    folder = os.path.join(constants.DEFAULT_LOCAL_TMP, "hostcheck-config-checks")
    os.makedirs(folder, exist_ok=True)
    answer = os.path.join(folder, hashlib.sha256(asked.encode()).hexdigest()[:32] + ".json")
    with open(answer + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(answer):
            with open(answer) as kept:
                return tuple(json.load(kept))
        result = run(argv, stdin, env, cwd)
        with open(answer + ".new", "w") as new:
            json.dump(result, new)
        os.replace(answer + ".new", answer)
        return result


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


class Validation(RoleAction):
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
            rc, stdout, stderr, msg = run_once_per_run(
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


# What reading and judging the host need besides the variables.
VERIFYING = {
    "probe": {"type": "dict", "required": True},
    "timer_units": {"type": "dict", "required": True},
    "timer_argv": {"type": "list", "elements": "str", "required": True},
    "argv_stdout": {"type": "list", "elements": "str", "required": True},
    "passed_in_this_run": {"type": "bool", "required": True},
}


def config_held(config: dict | None) -> object:
    """What hostcheck_config_file holds, parsed (None when absent)."""
    if config is None:
        return None
    try:
        return yaml.safe_load(config["text"])
    except yaml.YAMLError as exc:
        return {"unreadable": str(exc).splitlines()[0]}


def installation_verified(read: dict, wanted: dict) -> str:
    """hostcheck installed, the config file and the latest report as wanted; Invalid naming
    what is there when not. wanted: venv, config_file, config, report_dir, run, profile."""
    version = (read["venv"]["hostcheck"] or {}).get("version")
    held = config_held(read["config"])
    report = read["report"] or {}
    config = wanted["config"]
    ok = version is not None and held == (config if config else None)
    if wanted["run"]:
        ok = (
            ok
            and report.get("schema_version") == 1
            and report.get("tool_version") == version
            and (
                wanted["profile"] not in PROFILE_NAMES or report.get("profile") == wanted["profile"]
            )
        )
    if not ok:
        raise Invalid(
            f"hostcheck in {wanted['venv']}: version {version}; {wanted['config_file']} holds "
            f"{to_json(held)} (hostcheck_config: {to_json(config)}); "
            f"{wanted['report_dir']}/report.json: schema {report.get('schema_version') or 'none'}, "
            f"by hostcheck {report.get('tool_version') or 'none'}, "
            f"profile {report.get('profile') or 'none'} (hostcheck_profile: {wanted['profile']})"
        )
    return (
        f"hostcheck {version} in {wanted['venv']}; config and latest report "
        f"({report.get('started_at') or 'not run'}) as wanted"
    )


def unit_value(text: str, key: str) -> str:
    line = next((x for x in text.splitlines() if x.startswith(f"{key}=")), f"{key}=")
    return line[len(key) + 1 :]


def timer_verified(read: dict, wanted: dict, host: str) -> tuple[list[str], list[str]]:
    """(what holds, what does not) of the timer. wanted: enabled, unit_dir, argv, schedule,
    units (the text the role writes, by unit name)."""
    units = {name: found for name, found in read["units"].items() if found}
    unit_dir = wanted["unit_dir"]
    if not wanted["enabled"]:
        if units:
            return [], [
                f"hostcheck_timer_enabled is false but hostcheck units are still in {unit_dir}"
            ]
        return ["no hostcheck timer, as wanted"], []
    held, problems = [], []
    texts = {name: found["text"] for name, found in units.items()}
    exec_start = systemd_split(unit_value(texts.get("hostcheck.service", ""), "ExecStart"))
    on_calendar = unit_value(texts.get("hostcheck.timer", ""), "OnCalendar")
    differing = [name for name, text in wanted["units"].items() if texts.get(name) != text]
    if exec_start != wanted["argv"] or on_calendar != wanted["schedule"]:
        problems.append(
            f"hostcheck_timer_enabled: the units in {unit_dir} run {to_json(exec_start)} on "
            f"{to_json(on_calendar)}, wanted {to_json(wanted['argv'])} on "
            f"{to_json(wanted['schedule'])}"
        )
    elif differing:
        problems.append(
            f"hostcheck_timer_*: {', '.join(differing)} in {unit_dir} differ from what the "
            "role writes"
        )
    else:
        held.append(f"hostcheck.timer runs {' '.join(wanted['argv'])} on {wanted['schedule']}")
    if not read["systemd"]:
        held.append(
            f"systemd is not the init system on {host}: the units are checked, not the "
            "timer's state"
        )
        return held, problems
    state = read["timer"]
    if (state.get("UnitFileState"), state.get("ActiveState")) != ("enabled", "active"):
        problems.append(
            f"hostcheck.timer on {host}: UnitFileState {state.get('UnitFileState') or 'unknown'}, "
            f"ActiveState {state.get('ActiveState') or 'unknown'}"
        )
    else:
        held.append("hostcheck.timer is enabled and active")
    return held, problems


def dataloader_verified(found: dict | None, workload: dict | None) -> tuple[list[str], list[str]]:
    """(what holds, what does not) of the DataLoader settings file. workload: what the
    variables give on this host, None when hostcheck_dataloader_enabled is false."""
    if found is None:
        return [], []
    reasons = dataloader_reasons(found, workload, installing=False)
    path = found["path"]
    if workload is None:
        if reasons:
            return [], [
                f"hostcheck_dataloader_enabled is false but {path} (written by hostcheck loop "
                "--sweep --write) is still there"
            ]
        return [], []
    if reasons:
        return [], [f"hostcheck_dataloader_enabled: {'; '.join(reasons)}"]
    settings = found["settings"]
    loader = settings["dataloader"]
    keys = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
    kwargs = ", ".join(f"{key}={loader.get(key)!r}" for key in keys)
    prefetcher = "with" if settings.get("prefetcher") else "without"
    return [
        f"{path}: DataLoader({kwargs}) {prefetcher} a prefetcher, measured at "
        f"{settings.get('measured_at')} for this workload"
    ], []


def run_verified(done: dict, fail_on: str, host: str) -> str:
    """hostcheck run now (report on standard output) passes; Invalid with the failing ids."""
    stdout = done.get("stdout") or ""
    checks = json.loads(stdout).get("checks", []) if stdout.lstrip().startswith("{") else []
    rc = done.get("rc")
    if rc == 0:
        return f"hostcheck passes now ({len(checks)} checks)"
    bad = ["fail", "error"] + (["warn"] if fail_on == "warn" else [])
    failing = [check["id"] for check in checks if check.get("status") in bad]
    said = failing or (done.get("stderr_lines") or [done.get("msg", "no message")])[-3:]
    raise Invalid(f"hostcheck run exits {rc} on {host}: {said}")


# What reading the host and planning need besides the variables.
PLANNING = {
    "probe": {"type": "dict", "required": True},
    "timer_units": {"type": "dict", "required": True},
    "config_text": {"type": "str", "required": True},
    "bin": {"type": "str", "required": True},
    "wheel_read": {"type": "dict"},
}


def wheel_of(registered: object) -> dict:
    """The controller's wheel as tasks/wheel.yml read it; {} when there is none (a requirement)."""
    if not isinstance(registered, Mapping) or not registered.get("stdout"):
        return {}
    return json.loads(registered["stdout"])


def unmet(requirement: str, distributions: dict, requires: list[str] = ()) -> str:
    """'' when the venv's distributions satisfy a pip requirement (its extras too, from the
    Requires-Dist lines of the distribution), else why not."""
    try:
        wanted = Requirement(requirement)
    except InvalidRequirement:
        return f"{requirement}: not a requirement the role can compare (pip decides)"
    if wanted.url:
        return f"{requirement}: a URL (pip decides)"
    installed = distributions.get(canonicalize_name(wanted.name))
    if installed is None:
        return f"{wanted.name} is not installed"
    try:
        satisfied = wanted.specifier.contains(installed, prereleases=True)
    except InvalidVersion:
        satisfied = False
    if not satisfied:
        return f"{wanted.name} {installed} is installed, {requirement} is wanted"
    environments = [{"extra": extra} for extra in sorted(wanted.extras)] or [{"extra": ""}]
    for line in requires:
        try:
            needed = Requirement(line)
        except InvalidRequirement:
            continue
        if needed.marker is None or any(needed.marker.evaluate(env) for env in environments):
            why = unmet(f"{needed.name}{needed.specifier}", distributions)
            if why:
                return f"{why} (needed by {requirement})"
    return ""


def install_reasons(
    venv: dict, path: str, wheel: dict, requirement: str, before: list[str]
) -> tuple[list[str], bool]:
    """Why the venv needs pip (empty: it holds what is wanted), and whether hostcheck itself
    must be (re)installed. A wheel: its version and files (RECORD); a requirement: satisfied,
    extras included; hostcheck_pip_packages_before: each satisfied."""
    if not venv["python"]:
        return [f"there is no venv at {path}"], True
    found = venv["hostcheck"]
    why = ""
    if found is None:
        why = f"hostcheck is not installed in {path}"
    elif wheel and found["version"] != wheel["version"]:
        why = f"hostcheck {found['version']} is installed, the wheel is {wheel['version']}"
    elif wheel and set(wheel["record"]) - set(found["record"]):
        why = f"hostcheck {found['version']} in {path} has other files than {wheel['filename']}"
    elif not wheel and requirement:
        why = unmet(requirement, venv["distributions"], found["requires"])
    reasons = [why] if why else []
    for item in before:
        missing = unmet(item, venv["distributions"])
        if missing:
            reasons.append(f"{missing} (hostcheck_pip_packages_before)")
    return reasons, bool(why)


def config_reasons(config: dict | None, wanted: str | None, path: str) -> list[str]:
    """Why hostcheck_config_file must be written or removed (wanted None: it must not exist)."""
    if wanted is None:
        return [f"{path} is there while hostcheck_config is empty"] if config else []
    if config is None:
        return [f"{path} does not exist"]
    if config["text"] != wanted:
        return [f"{path} differs from hostcheck_config"]
    if config["mode"] != "0644":
        return [f"{path} has mode {config['mode']}, not 0644"]
    return []


def timer_reasons(read: dict, units: dict | None, unit_dir: str) -> list[str]:
    """Why the timer's units or state must change (units None: the timer must not exist)."""
    if units is None:
        there = [name for name, found in read["units"].items() if found]
        return [f"{', '.join(there)} still in {unit_dir}"] if there else []
    reasons = [f"{path} does not exist" for path, exists in read["dirs"].items() if not exists]
    for name, text in units.items():
        found = read["units"].get(name)
        if found is None:
            reasons.append(f"{name} is not in {unit_dir}")
        elif found["text"] != text:
            reasons.append(f"{name} differs from the hostcheck_timer_* variables")
        elif found["mode"] != "0644" or found["uid"] != 0:
            reasons.append(f"{name} is not root's with mode 0644")
    if read["systemd"]:
        state = read["timer"]
        if (state.get("UnitFileState"), state.get("ActiveState")) != ("enabled", "active"):
            reasons.append(
                f"hostcheck.timer is {state.get('UnitFileState', 'unknown')} and "
                f"{state.get('ActiveState', 'unknown')}, not enabled and active"
            )
        if state.get("NeedDaemonReload") == "yes":
            reasons.append("systemd has not loaded the units as they are")
    return reasons


def stale_reasons(read: dict, report_path: str) -> list[str]:
    """Why the latest report does not stand for the host as it is now (empty: it passed, and
    nothing hostcheck checks changed since: the parts recorded with it are the parts now)."""
    report, recorded = read["report"], read["recorded"] or {}
    if report is None:
        return [f"there is no report at {report_path}"]
    if report.get("unreadable") is not None:
        return [f"{report_path} is unreadable: {report['unreadable']}"]
    made = f"the report of {report.get('started_at')}"
    if report.get("exit_code") != 0:
        return [f"{made} did not pass (exit {report.get('exit_code')})"]
    if (recorded.get("report") or {}).get("sha256") != report.get("sha256"):
        return [f"no record of the host state {made} was made for"]
    if read["parts"] is None:
        return [f"the host state cannot be read: {read['parts_unread']}"]
    before, now = recorded.get("parts") or {}, read["parts"]
    changed = sorted(part for part in set(before) | set(now) if before.get(part) != now.get(part))
    if changed:
        return [f"changed since {made}: {', '.join(changed)}"]
    return []


def run_reasons(
    measure: str,
    changing: bool,
    stale: list[str],
    why: str = "this run installs or configures hostcheck",
) -> list[str]:
    """Why hostcheck runs now (empty: it does not): asked (hostcheck_measure: always), the role
    changes what it checks with (why says what), or the latest report does not stand."""
    if measure == "always":
        return ["hostcheck_measure is always"]
    if changing:
        return [why, *stale]
    return stale


def dataloader_workload(variables: dict, host: dict) -> dict:
    """The workload the hostcheck_dataloader_* variables (WORKLOAD_VARIABLES, whole numbers
    validated) give on this host, keyed as the settings file records it: ranks 0 is one per
    NVIDIA GPU (1 without), max_workers 0 the physical cores // ranks (at least 1), as
    hostcheck loop --sweep resolves them; sample_cost_us None for jpeg samples (not
    compared)."""
    given = {key: variables[name] for key, name in WORKLOAD_VARIABLES.items()}
    ranks = ranks_per_node(int(given["ranks_per_node"]), int(host["gpus"]))
    sample = str(given["sample"])
    return {
        "sample": sample,
        "sample_cost_us": int(given["sample_cost_us"]) if sample in ("busy", "sleep") else None,
        "batch_size": int(given["batch_size"]),
        "step_time_s": int(given["step_time_s"]) / 1000,
        "ranks_per_node": ranks,
        "dataset_path": str(given["dataset_path"]) or None,
        "max_workers": int(given["max_workers"])
        or sweep_max_workers(int(host["physical_cores"]), ranks),
    }


def wanted_workload(variables: dict, found: dict | None) -> dict | None:
    """The DataLoader workload the variables give on this host; None when the settings file
    is not wanted (hostcheck_dataloader_enabled false) or was not read."""
    if found is None or not variables["hostcheck_dataloader_enabled"]:
        return None
    return dataloader_workload(
        {name: variables[name] for name in WORKLOAD_VARIABLES.values()}, found["host"]
    )


def _same(recorded: object, wanted: object) -> bool:
    if isinstance(wanted, float) and isinstance(recorded, (int, float)):
        return not isinstance(recorded, bool) and abs(recorded - wanted) <= 1e-9 * max(1, wanted)
    return recorded == wanted


def dataloader_reasons(found: dict | None, workload: dict | None, installing: bool) -> list[str]:
    """Why the DataLoader settings file must be measured again or removed (empty: nothing).
    found: the probe's dataloader reading, whose verdict is the venv's hostcheck's (valid and
    fresh as training code reads it); workload: dataloader_workload(), None when
    hostcheck_dataloader_enabled is false (a file of the role's kind is then removed)."""
    if found is None:
        return []
    path, settings = found["path"], found["settings"]
    if workload is None:
        if settings is not None and settings.get("kind") == DATALOADER_KIND:
            return [f"hostcheck_dataloader_enabled is false: {path} (written by hostcheck loop "
                    "--sweep --write) is removed"]  # fmt: skip
        return []
    if settings is None:
        return [f"{path} does not exist"]
    state, problem = found["verdict"]["state"], found["verdict"]["problem"]
    if state == "unjudged":
        return [f"{path} cannot be judged: {problem}"]
    if state != "ok":
        return [f"{path} is {state}: {problem.removeprefix(f'{state}: ')}"]
    recorded = settings["workload"]
    reasons = [
        f"{path} records {key} {to_json(recorded.get(key))}, {WORKLOAD_VARIABLES[key]} "
        f"gives {to_json(wanted)}"
        for key, wanted in workload.items()
        if wanted is not None or key == "dataset_path"
        if not _same(recorded.get(key), wanted)
    ]
    if installing:
        reasons.append(f"hostcheck is (re)installed since {path} was measured")
    return reasons


def sweep_argv(hostcheck: str, options: list[str], path: str, workload: dict, seconds: float):
    """The hostcheck loop --sweep --write command line that measures the settings file."""
    argv = [hostcheck, "loop", "--sweep", "--write", path, *options]
    argv += ["--ranks", str(workload["ranks_per_node"]), "--sample", workload["sample"]]
    if workload["sample_cost_us"] is not None:
        argv += ["--sample-cost-us", str(workload["sample_cost_us"])]
    argv += [
        *("--batch-size", str(workload["batch_size"])),
        *("--step-ms", f"{workload['step_time_s'] * 1000:g}"),
        *("--seconds", f"{seconds:g}"),
        *("--max-workers", str(workload["max_workers"])),
    ]
    if workload["dataset_path"]:
        argv += ["--dataset-path", workload["dataset_path"]]
    return argv


def plan_message(plan: dict, run: bool, venv: str, started_at: object) -> str:
    changes = [
        f"{what}: {'; '.join(reasons)}"
        for what, reasons in (
            ("install", plan["install"]),
            ("config", plan["config"]),
            ("timer", plan["timer"]),
            ("dataloader", plan.get("dataloader") or []),
        )
        if reasons
    ]
    said = " | ".join(changes) or "nothing to install, configure or set up"
    if not run:
        return f"{said} | hostcheck_run is false: hostcheck is installed in {venv} but not run"
    if plan["run"]:
        return f"{said} | hostcheck runs: {'; '.join(plan['run'])}"
    return (
        f"{said} | hostcheck is not run: its report of {started_at} passed and nothing it "
        "checks changed since (hostcheck_measure: always runs it)"
    )
