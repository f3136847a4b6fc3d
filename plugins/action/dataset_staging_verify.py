"""Verifies the staging file system and the staged datasets after provisioning, in one task:
the file system at dataset_staging_mount mounted by UUID with its options and persisted in fstab
(one command reads both), and each dataset (and its hot copy) complete at its destination (the
dataset_stage module with dry_run, one call each). Where there is no disk and no dataset
nothing is read.

    - hostcheck.gpu_hosts.dataset_staging_verify:   # the arguments of dataset_staging_validate

The validation comes first (the Validation of plugins/plugin_utils/dataset_staging_rules.py;
reused when the run validated already). Documented in plugins/modules/dataset_staging_verify.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    MOUNT_SCRIPT,
    Validation,
    copy_problem,
    dataset_copies,
    mount_problem,
    parse_mount_read,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


class ActionModule(Validation):
    VERIFIES = True

    def verify(self, values: dict) -> list[str]:
        settings = values["settings"]
        if settings["layout"] == "none" and not settings["datasets"]:
            return ["dataset_staging: no disk and no dataset given, nothing to verify"]
        holds, problems = [], []
        if settings["layout"] != "none":
            mounted, persisted = self.read_mount(settings["mount"])
            problem = mount_problem(settings, mounted, persisted)
            if problem:
                problems.append(problem)
            else:
                holds.append(
                    f"{settings['mount']}: {mounted['fstype']} mounted by UUID {mounted['uuid']}"
                    ", as fstab says"
                )
        for copy in dataset_copies(settings):
            checked = self.check_copy(copy)
            problem = copy_problem(copy, checked)
            if problem:
                problems.append(problem)
            else:
                holds.append(f"{copy['dest']}: {checked['files_total']} files complete")
        if problems:
            raise Invalid(" | ".join(problems))
        return holds

    def read_mount(self, mount: str) -> tuple[dict | None, dict | None]:
        read = self.host_command(["/bin/sh", "-c", MOUNT_SCRIPT, "sh", mount])
        if read.get("rc") != 0:
            raise Invalid(
                f"dataset_staging_mount: reading {mount} with findmnt failed: "
                f"{(read.get('stderr') or read.get('msg') or '').strip()}"
            )
        return parse_mount_read(read["stdout"])

    def check_copy(self, copy: dict) -> dict:
        """What a copy would still do (dataset_stage with dry_run: nothing is written)."""
        return self.on_host("hostcheck.gpu_hosts.dataset_stage", copy, fail=False)
