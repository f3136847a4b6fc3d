"""Plans what the hostcheck role does on a host, after the roles before it (tasks/main.yml):
validates as hostcheck_validate does (its result from validate.yml, given again), reads the
host once (the hostcheck_probe module) and returns `plan`: what install, config, timer and the
DataLoader settings file must change, each with the reasons (empty: nothing), and why hostcheck
must run (empty: the latest report passed for the host state as it is, so it stands). Its
message says all of it.

    - hostcheck.gpu_hosts.hostcheck_plan:
        hostcheck_enabled: "{{ hostcheck_enabled }}"   # ... every hostcheck_* variable
        number_ranges: "{{ __hostcheck_number_ranges }}"  # ... the role's constants
        probe: "{{ __hostcheck_probe }}"                   # ... and what reading the host needs
        validated: "{{ __hostcheck_validation | default({}) }}"
      register: __hostcheck_host

The DataLoader settings file (hostcheck_dataloader_*) is measured again when it is missing,
malformed or stale (the hostcheck in the venv judges it, as training code reads it; before
hostcheck is installed it cannot, and the file is measured again), recorded for another
workload than the variables give, or hostcheck is (re)installed; `plan.dataloader_argv` is the
`hostcheck loop --sweep --write` that measures it. Documented in
plugins/modules/hostcheck_plan.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from ansible.errors import AnsibleError
from ansible_collections.hostcheck.gpu_hosts.plugins.action.hostcheck_validate import (
    CHECKED_AGAINST,
    DATALOADER_KIND,
    WHEEL,
    WORKLOAD_VARIABLES,
    check_seconds,
    to_json,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.hostcheck_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataloader_workload import (
    ranks_per_node,
    sweep_max_workers,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

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


class ActionModule(Validation):
    INTERNAL: ClassVar[dict] = {**CHECKED_AGAINST, **PLANNING}
    READING = tuple(PLANNING)

    def run(self, tmp=None, task_vars=None):
        """The validation (validate.yml's, given again), then the plan in place of its result."""
        result = super().run(tmp, task_vars)
        if result.get("failed") or not self.enabled():
            return result
        try:
            plan, said = self.plan()
        except (Invalid, AnsibleError) as exc:
            result.update(failed=True, msg=str(exc).strip())
            return result
        return {"changed": False, "plan": plan, "msg": said, "_ansible_verbose_always": True}

    def check_dataset(self, found: dict) -> None:
        """Before the sweep: the dataset folder exists on the host (an earlier role, such as
        dataset_staging, may have made it in this run, so it is read here, not in the first
        validation)."""
        path = self.arg("hostcheck_dataloader_dataset_path")
        if path and not found.get("dataset_is_dir"):
            raise Invalid(
                f"hostcheck_dataloader_dataset_path: {path} is not a folder on {self.host} "
                "(the DataLoader sweep reads its samples from there)"
            )

    def wanted_config(self) -> str | None:
        return self.reading["config_text"] if self.arg("hostcheck_config") else None

    def plan(self) -> tuple[dict, str]:
        """What the role must do on this host, and the message that says it."""
        read = self.read_host()
        venv, wheel = self.arg("hostcheck_venv"), str(self.arg("hostcheck_wheel"))
        install, install_hostcheck = install_reasons(
            read["venv"],
            venv,
            wheel_of(self.reading["wheel_read"]),
            "" if wheel == "" or WHEEL.match(wheel) else wheel,
            list(self.arg("hostcheck_pip_packages_before")),
        )
        config_file = self.arg("hostcheck_config_file")
        config = config_reasons(read["config"], self.wanted_config(), config_file)
        timer = timer_reasons(read, self.wanted_units(), self.unit_dir())
        found = read.get("dataloader")
        workload = wanted_workload(self.args, found)
        dataloader = dataloader_reasons(found, workload, install_hostcheck)
        argv = []
        if workload is not None and dataloader:
            self.check_dataset(found)
            argv = sweep_argv(
                self.reading["bin"],
                ["--profile", str(self.arg("hostcheck_profile"))]
                + (["--config", config_file] if self.arg("hostcheck_config") else []),
                found["path"],
                workload,
                check_seconds(self.arg("hostcheck_dataloader_seconds")),
            )
        run = self.arg("hostcheck_run")
        report_path = f"{self.arg('hostcheck_report_dir')}/report.json"
        stale = stale_reasons(read, report_path)
        why = (
            "this run installs or configures hostcheck"
            if install or config
            else f"this run {'measures' if argv else 'removes'} the DataLoader settings file"
        )
        changing = bool(install or config or dataloader)
        plan = {
            "install": install,
            "install_hostcheck": install_hostcheck,
            "config": config,
            "timer": timer,
            "dataloader": dataloader,
            "dataloader_argv": argv,
            "run": run_reasons(self.arg("hostcheck_measure"), changing, stale, why) if run else [],
            "hostcheck": (read["venv"]["hostcheck"] or {}).get("version"),
            "torch": read["venv"]["distributions"].get("torch"),
            "systemd": read["systemd"],
            "units_present": [name for name, found in read["units"].items() if found],
        }
        return plan, plan_message(plan, run, venv, (read["report"] or {}).get("started_at"))
