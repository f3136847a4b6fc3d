"""Verifies the staging file system and the staged datasets after provisioning, in one task:
the file system at dataset_staging_mount mounted by UUID with its options and persisted in fstab
(one command reads both), and each dataset (and its hot copy) complete at its destination (the
dataset_stage module with dry_run, one call each). Where there is no disk and no dataset
nothing is read.

    - hostcheck.gpu_hosts.dataset_staging_verify:   # the arguments of dataset_staging_validate

The validation comes first (plugins/action/dataset_staging_validate.py; reused when the run
validated already). Documented in plugins/modules/dataset_staging_verify.py.
"""

from __future__ import annotations

import json

from ansible.plugins.filter.core import to_json
from ansible_collections.hostcheck.gpu_hosts.plugins.action.dataset_staging_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

# The mount at $1 and the fstab line findmnt finds for it, as {"live": ..., "fstab": ...}
# (null where findmnt finds none).
MOUNT_SCRIPT = """printf '{"live": '
findmnt --json --bytes --output SOURCE,TARGET,FSTYPE,OPTIONS,UUID "$1" || printf null
printf ', "fstab": '
findmnt --fstab --json --output SOURCE,TARGET,FSTYPE,OPTIONS --target "$1" || printf null
printf '}\\n'
"""


def parse_mount_read(stdout: str) -> tuple[dict | None, dict | None]:
    """(mounted, persisted): findmnt's first file system of each, None where it found none."""
    read = json.loads(stdout)
    return tuple(
        (found or {}).get("filesystems", [None])[0] for found in (read["live"], read["fstab"])
    )


def mount_problem(settings: dict, mounted: dict | None, persisted: dict | None) -> str | None:
    """None when the file system is mounted by UUID with its options and listed in fstab."""
    wanted_options = settings["mount_options"]
    holds = (
        mounted is not None
        and persisted is not None
        and mounted["fstype"] == settings["filesystem"]
        and persisted["source"] == f"UUID={mounted['uuid']}"
        and set(wanted_options) <= set(persisted["options"].split(","))
        and ("noatime" not in wanted_options or "noatime" in mounted["options"].split(","))
    )
    if holds:
        return None
    mounted = mounted or {"fstype": "nothing mounted", "uuid": "", "options": ""}
    persisted = persisted or {"source": "no fstab line", "options": ""}
    return (
        f"dataset_staging_mount: {settings['mount']} should hold a {settings['filesystem']} "
        f"file system mounted with {','.join(wanted_options)} and listed in fstab by UUID; "
        f"mounted: {to_json(mounted)}; fstab: {to_json(persisted)}"
    )


def dataset_copies(settings: dict) -> list[dict]:
    """Each staged copy to check (dataset_stage's arguments): the dataset at its destination,
    and its hot copy, both against the manifest the staging recorded; dry_run, so nothing is
    written."""
    copies = []
    for dataset in settings["datasets"]:
        manifest = f"{settings['state_dir']}/{dataset['name']}.sha256"
        places = [(dataset["dest"], settings["state_dir"])]
        if dataset["hot"]:
            places.append((dataset["hot_dest"], settings["hot_state_dir"]))
        copies += [
            {
                "mode": "copy",
                "name": dataset["name"],
                "source": dataset["dest"],
                "manifest": manifest,
                "dest": dest,
                "state_dir": state_dir,
                "checksum": settings["checksum"],
                "verify": settings["verify"],
                "dry_run": True,
            }
            for dest, state_dir in places
        ]
    return copies


def copy_problem(copy: dict, checked: dict) -> str | None:
    """None when the dry-run copy found the destination complete."""
    if checked.get("failed"):
        return f"{copy['dest']}: {checked.get('msg', 'could not be checked')}"
    if int(checked.get("would_copy_files", 0)) > 0:
        return f"{copy['dest']} is not complete: {checked.get('summary')}"
    return None


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
