"""Verifies hostcheck after provisioning, in one task and one read of the host (hostcheck_probe):
hostcheck installed in the venv, hostcheck_config_file holding hostcheck_config (or absent),
the latest report valid and written by this hostcheck for this profile, the timer's units as
hostcheck_timer_* say (or none) and, with systemd, the timer enabled and active, the DataLoader
settings file measured on this host for the workload hostcheck_dataloader_* give (or, switched
off, none of the role's); then that
hostcheck passes: its latest report passed for the host state as it is now (the record beside
the report, made when it passed), else hostcheck runs now (a second round trip, writing
nothing) and must pass.

    - hostcheck.gpu_hosts.hostcheck_verify:
        hostcheck_enabled: "{{ hostcheck_enabled }}"   # ... every hostcheck_* variable
        number_ranges: "{{ __hostcheck_number_ranges }}"  # ... the role's constants
        passed_in_this_run: "{{ __hostcheck_passed_in_this_run }}"
        validated: "{{ __hostcheck_validation | default({}) }}"

The validation comes first (plugins/action/hostcheck_validate.py; reused when the run validated
already). Documented in plugins/modules/hostcheck_verify.py.
"""

from __future__ import annotations

import json
from typing import ClassVar

import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.action.hostcheck_plan import (
    dataloader_reasons,
    stale_reasons,
    wanted_workload,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.hostcheck_validate import (
    CHECKED_AGAINST,
    to_json,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.hostcheck_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_schema import (
    PROFILE_NAMES,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.systemd_quoting import (
    systemd_split,
)

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


class ActionModule(Validation):
    VERIFIES = True
    INTERNAL: ClassVar[dict] = {**CHECKED_AGAINST, **VERIFYING}
    READING = tuple(VERIFYING)

    def verify(self, values: dict) -> list[str]:
        read = self.read_host()
        run = self.arg("hostcheck_run")
        report_dir = self.arg("hostcheck_report_dir")
        held: list[str] = []
        problems: list[str] = []
        try:
            held.append(
                installation_verified(
                    read,
                    {
                        "venv": self.arg("hostcheck_venv"),
                        "config_file": self.arg("hostcheck_config_file"),
                        "config": self.arg("hostcheck_config"),
                        "report_dir": report_dir,
                        "run": run,
                        "profile": self.arg("hostcheck_profile"),
                    },
                )
            )
        except Invalid as exc:
            problems.append(str(exc))
        enabled = self.arg("hostcheck_timer_enabled")
        timer_held, timer_problems = timer_verified(
            read,
            {
                "enabled": enabled,
                "unit_dir": self.unit_dir(),
                "argv": self.reading["timer_argv"],
                "schedule": self.arg("hostcheck_timer_schedule"),
                "units": self.wanted_units() or {},
            },
            self.host,
        )
        held += timer_held
        problems += timer_problems
        found = read.get("dataloader")
        loader_held, loader_problems = dataloader_verified(found, wanted_workload(self.args, found))
        held += loader_held
        problems += loader_problems
        if run and not problems:
            held += self.passing(read, f"{report_dir}/report.json")
        if problems:
            raise Invalid("; ".join(problems))
        return held

    def passing(self, read: dict, report_path: str) -> list[str]:
        """That hostcheck passes: its report stands for the host as it is, or it runs now."""
        stale = stale_reasons(read, report_path)
        asked = self.arg("hostcheck_measure") == "always"
        if not stale and self.reading["passed_in_this_run"]:
            return ["hostcheck passed in this run"]
        if not stale and not asked:
            return [
                f"hostcheck's report of {read['report']['started_at']} passed and nothing it "
                "checks changed since"
            ]
        done = self.host_command(self.reading["argv_stdout"])
        verdict = run_verified(done, self.arg("hostcheck_fail_on"), self.host)
        return [f"hostcheck ran ({'; '.join(stale) or 'hostcheck_measure is always'})", verdict]
