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

from typing import ClassVar

from ansible.errors import AnsibleError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import (
    CHECKED_AGAINST,
    PLANNING,
    WHEEL,
    Validation,
    check_seconds,
    config_reasons,
    dataloader_reasons,
    install_reasons,
    plan_message,
    run_reasons,
    stale_reasons,
    sweep_argv,
    timer_reasons,
    wanted_workload,
    wheel_of,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


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
