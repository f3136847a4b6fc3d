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

The validation comes first (the Validation of plugins/plugin_utils/hostcheck_rules.py; reused
when the run validated already). Documented in plugins/modules/hostcheck_verify.py.
"""

from __future__ import annotations

from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import (
    CHECKED_AGAINST,
    VERIFYING,
    Validation,
    dataloader_verified,
    installation_verified,
    run_verified,
    stale_reasons,
    timer_verified,
    wanted_workload,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


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
