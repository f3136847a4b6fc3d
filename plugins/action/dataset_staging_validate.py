"""Validates the dataset_staging role before any change: its variables together, then (read
only) the disks and the datasets' sources, so a disk that holds data, a missing source or a hot
copy too large for its tmpfs stops the play here.

    - hostcheck.gpu_hosts.dataset_staging_validate:
        dataset_staging_enabled: "{{ dataset_staging_enabled }}"   # ... every dataset_staging_*
        number_ranges: "{{ __dataset_staging_number_ranges }}"
        validated: "{{ __dataset_staging_validation | default({}) }}"
      register: __dataset_staging_validation

values (vars/main.yml names them as the role's tasks use them):
    settings  the variables checked together (plugins/plugin_utils/dataset_staging_rules.py)
    os_vars   the role's per-OS vars (vars/<os_family>.yml)
    probe     what hostcheck.gpu_hosts.dataset_disk_probe read on the host (a skipped result
              when no disk is given)
    disk      the disk plan: {action, target, refusals: [], wipe}
    measured  each dataset's measure result (dataset_stage mode measure), node ones first, with
              the dataset under __dataset_staging_item as a loop result has it
    hot_fs    {size, target} of the file system hot copies go to (when a dataset is hot)
Nothing when dataset_staging_enabled is false. Documented in
plugins/modules/dataset_staging_validate.py; the base is plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

import os
from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import format_size
from ansible_collections.hostcheck.gpu_hosts.plugins.modules.dataset_stage import (
    StagingError,
    stage,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    dataset_staging_disk_plan,
    dataset_staging_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

# settings key -> the role variable it is read from (dataset_staging_<key>)
GIVEN = (
    "devices",
    "filesystem",
    "mount",
    "mount_options",
    "label",
    "force_format",
    "raid_name",
    "raid_chunk",
    "datasets",
    "parallel",
    "checksum",
    "verify",
    "verify_written",
    "hot_root",
)
PROBE_SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
# The size and mount point of the file system a path is on (or would be, once made).
HOT_FS_SCRIPT = """set -o pipefail
folder=$1
while [ ! -e "$folder" ]; do folder=$(dirname "$folder"); done
df -B1 --output=size,target "$folder" | tail -n 1
"""


def refuse(refusals: list[str]) -> None:
    if refusals:
        raise Invalid(" | ".join(refusals))


def measure_args(dataset: dict, checksum: str) -> dict:
    args = {"mode": "measure", "name": dataset["name"], "source": dataset["source"]}
    if dataset["manifest"]:
        args.update(manifest=dataset["manifest"], checksum=checksum)
    return args


def measure_here(args: dict) -> dict:
    """What the dataset_stage module gives for `args` (mode measure), run in this process: on
    the controller, as the controller's user. Paths are expanded as its `path` options are."""
    options = dict(args)
    for key in ("source", "manifest"):
        if options.get(key):
            options[key] = os.path.expanduser(os.path.expandvars(options[key]))
    try:
        return stage(options)
    except StagingError as error:
        return {"failed": True, "msg": str(error), **error.result}
    except Exception as error:  # the module would fail with it as its message
        return {"failed": True, "msg": f"{type(error).__name__}: {error}"}


def unreadable(measured: list[dict]) -> list[str]:
    return [
        f"{m['__dataset_staging_item']['variable']}: {m.get('msg', 'could not be read')}"
        for m in measured
        if "bytes_total" not in m
    ]


def parse_hot_fs(stdout: str) -> dict:
    """df's `size target` line: {size, target}."""
    size, dummy, target = stdout.strip().partition(" ")
    return {"size": int(size), "target": target.strip()}


def too_large(measured: list[dict], hot_fs: dict) -> list[str]:
    size = hot_fs["size"]
    return [
        f"{m['__dataset_staging_item']['variable']}.hot: the dataset is {m['bytes_total']} bytes "
        f"({format_size(m['bytes_total'])}), more than the {size} bytes "
        f"({format_size(size)}) of {hot_fs['target']} (dataset_staging_hot_root)"
        for m in measured
        if m["__dataset_staging_item"]["hot"]
        and "bytes_total" in m
        and int(m["bytes_total"]) > size
    ]


def _clean(result: dict) -> dict:
    """A module result as `register:` keeps it (without Ansible's internal keys)."""
    return {key: value for key, value in result.items() if not key.startswith("_ansible")}


class ActionModule(RoleAction):
    ROLE = "dataset_staging"
    INTERNAL: ClassVar[dict] = {
        # {variable: [lowest, highest, unit]} (vars/main.yml)
        "number_ranges": {"type": "dict", "required": True},
    }
    SWITCHED_OFF = "no disk touched, no dataset staged"
    CHECKS_WHEN_OFF = False

    def validate(self) -> dict:
        facts = self.facts()
        os_vars = self.os_vars(required=True)
        settings = dataset_staging_settings(
            {key: self.arg(f"dataset_staging_{key}") for key in GIVEN}, facts["os_family"]
        )

        probe = dict(PROBE_SKIPPED)
        if settings["layout"] != "none":
            probe = self.on_host(
                "hostcheck.gpu_hosts.dataset_disk_probe",
                {
                    "devices": settings["devices"],
                    "mount": settings["mount"],
                    "raid_name": settings["raid_name"],
                },
                fail=False,
            )
            if probe.get("failed"):
                raise Invalid(f"dataset_staging_devices: {probe.get('msg', probe)}")
            probe = _clean(probe)
        disk = dataset_staging_disk_plan(probe if settings["layout"] != "none" else {}, settings)
        refuse(disk["refusals"])

        measured = []
        for side in ("node", "controller"):
            for dataset in settings["datasets"]:
                if dataset["side"] != side:
                    continue
                args = measure_args(dataset, settings["checksum"])
                if side == "node":
                    result = _clean(
                        self.on_host("hostcheck.gpu_hosts.dataset_stage", args, fail=False)
                    )
                else:
                    result = measure_here(args)
                measured.append({**result, "__dataset_staging_item": dataset})
        refuse(unreadable(measured))

        if settings["layout"] == "none" and not settings["datasets"]:
            self.note(
                "dataset_staging_devices and dataset_staging_datasets are empty: nothing to do"
            )
        values = {
            "settings": settings,
            "os_vars": os_vars,
            "probe": probe,
            "disk": disk,
            "measured": measured,
        }
        if any(dataset["hot"] for dataset in settings["datasets"]):
            read = self.host_command(["/bin/bash", "-c", HOT_FS_SCRIPT, "df", settings["hot_root"]])
            if read.get("rc") != 0:
                raise Invalid(
                    f"dataset_staging_hot_root: the size of the file system of "
                    f"{settings['hot_root']} could not be read: "
                    f"{(read.get('stderr') or read.get('msg') or '').strip()}"
                )
            values["hot_fs"] = hot_fs = parse_hot_fs(read["stdout"])
            refuse(too_large(measured, hot_fs))
        return values
