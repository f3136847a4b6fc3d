"""Decisions of the dataset_staging role, as pure functions of the role's variables and of
what the disk probe read on the host, so every refusal is a table row in tests/unit. The
role's validate action (this file's Validation) uses them:

dataset_staging_settings(given, os_family)  the variables checked together, normalised:
    {devices, filesystem, layout, mount, datasets: [{name, source, side, dest, ...}], ...};
    Invalid names the variable (dataset_staging_datasets[2].source: ...). Their types, choices
    and the datasets' keys are the role's argument spec's, which the action checks first.
dataset_staging_disk_plan(probe, settings)  {action: none|reuse|create, target,
    refusals: [one line each, naming the device and what was found], wipe: [devices]}
"""

from __future__ import annotations

import json
import os
import os.path
import re
from typing import ClassVar

from ansible.plugins.filter.core import to_json
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_stage import (
    StagingError,
    stage,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import (
    format_size,
    parse_size,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

LABEL_LIMITS = {"xfs": 12, "ext4": 16, "btrfs": 255}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RAID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_OPTION = re.compile(r"^[a-z0-9_.-]+(=[^,\s]+)?$")
STATE_FOLDER = ".dataset-staging"


def _fail(variable: str, message: str) -> None:
    raise Invalid(f"{variable}: {message}")


def _absolute(variable: str, value: str) -> str:
    if not value.startswith("/"):
        _fail(variable, f"an absolute path; got {value!r}")
    if "\n" in value or "/../" in value + "/" or value.endswith("/.."):
        _fail(variable, f"a plain absolute path without '..'; got {value!r}")
    return os.path.normpath(value)


def _devices(given: list[str]) -> list[str]:
    for index, device in enumerate(given):
        variable = f"dataset_staging_devices[{index}]"
        if not device.startswith("/dev/"):
            _fail(variable, f"a path under /dev (best /dev/disk/by-id/...); got {device!r}")
        if ".." in device.split("/"):
            _fail(variable, f"a path without '..'; got {device!r}")
    if len(set(given)) != len(given):
        _fail("dataset_staging_devices", f"a device is listed twice: {given}")
    return list(given)


def _chunk_kib(given: str) -> int:
    """The md chunk in KiB from a size as module_utils/sizes.py reads it (512K = 512KiB)."""
    try:
        size = parse_size(given)
    except ValueError:
        size = 0
    kib = size // 1024
    if size % 1024 or kib < 4 or kib & (kib - 1):
        _fail(
            "dataset_staging_raid_chunk", f"a power of two of at least 4K, e.g. 512K; got {given!r}"
        )
    return kib


def _datasets(given: list[dict], mount: str, hot_root: str) -> list[dict]:
    datasets, seen = [], set()
    for index, entry in enumerate(given):
        variable = f"dataset_staging_datasets[{index}]"
        name = entry["name"]
        if not _NAME.match(name):
            _fail(f"{variable}.name", f"letters, digits, '.', '_' or '-'; got {name!r}")
        if name in seen:
            _fail("dataset_staging_datasets", f"the name {name!r} is used twice")
        seen.add(name)
        manifest = entry.get("manifest")
        datasets.append(
            {
                "name": name,
                "variable": f"dataset_staging_datasets[{name}]",
                "source": _absolute(f"{variable}.source", entry["source"]),
                "side": entry.get("from", "node"),
                "manifest": None
                if manifest is None
                else _absolute(f"{variable}.manifest", manifest),
                "hot": entry.get("hot", False),
                "dest": f"{mount}/{name}",
                "hot_dest": f"{hot_root}/{name}",
            }
        )
    return datasets


def dataset_staging_settings(given: dict, os_family: str = "Debian") -> dict:
    """The role's variables checked against each other, normalised."""
    filesystem = given["filesystem"]
    if filesystem == "btrfs" and os_family == "RedHat":
        _fail("dataset_staging_filesystem", "btrfs is not shipped by RHEL 8/9; use xfs or ext4")
    devices = _devices(given["devices"])
    mount = _absolute("dataset_staging_mount", given["mount"])
    if mount == "/" or mount.startswith(("/dev/shm", "/proc", "/sys")):
        _fail("dataset_staging_mount", f"a folder of its own such as /data; got {mount!r}")
    options = given["mount_options"]
    if not all(_OPTION.match(option) for option in options):
        _fail("dataset_staging_mount_options", f"a list of plain mount options; got {options!r}")
    label = given["label"]
    if not 0 < len(label) <= LABEL_LIMITS[filesystem]:
        _fail(
            "dataset_staging_label",
            f"1 to {LABEL_LIMITS[filesystem]} characters for {filesystem}; got {label!r}",
        )
    raid_name = given["raid_name"]
    if not _RAID_NAME.match(raid_name):
        _fail("dataset_staging_raid_name", f"letters, digits, '_' or '-'; got {raid_name!r}")
    parallel = int(given.get("parallel", 1))  # its range: __dataset_staging_number_ranges
    hot_root = _absolute("dataset_staging_hot_root", given["hot_root"])
    if hot_root.startswith(mount + "/") or mount.startswith(hot_root + "/") or hot_root == mount:
        _fail(
            "dataset_staging_hot_root",
            f"a folder apart from dataset_staging_mount; got {hot_root!r}",
        )
    if len(devices) > 1:
        layout = "btrfs" if filesystem == "btrfs" else "md"
    else:
        layout = "single" if devices else "none"
    return {
        "devices": devices,
        "filesystem": filesystem,
        "layout": layout,
        "mount": mount,
        "mount_options": options,
        "label": label,
        "force_format": given["force_format"],
        "raid_name": raid_name,
        "raid_chunk_kib": _chunk_kib(given.get("raid_chunk")),
        "parallel": parallel,
        "checksum": given["checksum"],
        "verify": given["verify"],
        "verify_written": given["verify_written"],
        "state_dir": f"{mount}/{STATE_FOLDER}",
        "hot_root": hot_root,
        "hot_state_dir": f"{hot_root}/{STATE_FOLDER}",
        "datasets": _datasets(given["datasets"], mount, hot_root),
    }


def _what(signature: dict) -> str:
    kind = signature.get("type") or "unknown"
    if signature.get("usage") == "partition table" or kind in ("gpt", "dos", "PMBR"):
        return f"a {kind} partition table"
    if kind == "linux_raid_member":
        return f"an md RAID member signature (array {signature.get('label') or '?'})"
    details = ", ".join(
        f"{key} {signature[key]}" for key in ("label", "uuid") if signature.get(key)
    )
    return f"a {kind} signature" + (f" ({details})" if details else "")


def _named(device: dict) -> str:
    if device["path"] == device.get("device"):
        return device["path"]
    return f"{device['path']} ({device.get('device')})"


def _busy(device: dict) -> list[str]:
    """Reasons never to touch a device, whatever dataset_staging_force_format says."""
    named = _named(device)
    found = [f"{named} is mounted at {', '.join(device['mounts'])}"] if device.get("mounts") else []
    if device.get("swap"):
        found.append(f"{named} is in use as swap")
    if device.get("holders"):
        found.append(
            f"{named} is part of {', '.join(device['holders'])} (an array or mapping holds it)"
        )
    return found


def _blank_problems(device: dict) -> list[str]:
    """What makes a device not blank (refused unless dataset_staging_force_format)."""
    named = _named(device)
    found = [f"{named} holds {_what(signature)}" for signature in device.get("signatures", [])]
    if device.get("partitions") and not any(
        "partition table" in _what(s) for s in device.get("signatures", [])
    ):
        found.append(f"{named} has partitions {', '.join(device['partitions'])}")
    return found


def _fs_of(device: dict) -> dict | None:
    for signature in device.get("signatures", []):
        if signature.get("usage", "filesystem") == "filesystem" and signature.get("uuid"):
            return signature
    return None


def _ours(fs: dict | None, probe: dict, settings: dict, sources: set[str]) -> bool:
    """A file system this role made: mounted at our mount, or in fstab for it by UUID."""
    if not fs or fs.get("type") != settings["filesystem"]:
        return False
    mounted = probe.get("mounted_at_mount") or {}
    if mounted.get("device") in sources:
        return True
    fstab = probe.get("fstab") or {}
    return fstab.get("src") in (f"UUID={fs['uuid']}", f'UUID="{fs["uuid"]}"')


def dataset_staging_disk_plan(probe: dict, settings: dict) -> dict:
    """What to do with the disks: nothing, reuse our file system, or create one; and why not."""
    layout = settings["layout"]
    if layout == "none":
        return {"action": "none", "target": None, "refusals": [], "wipe": []}
    refusals = [
        f"dataset_staging_devices: {pattern} matches no device"
        for pattern in probe.get("unmatched", [])
    ]
    for problem in probe.get("problems", []):
        refusals.append(f"dataset_staging_devices: {problem}")
    devices = probe.get("devices", [])
    if refusals or not devices:
        return {
            "action": "refuse",
            "target": None,
            "refusals": refusals or ["dataset_staging_devices: no device found"],
            "wipe": [],
        }
    if len(devices) > 1 and layout == "single":
        layout = "btrfs" if settings["filesystem"] == "btrfs" else "md"
    names = {d["device"] for d in devices}
    mounted = probe.get("mounted_at_mount") or {}
    md = probe.get("md") or {}
    if layout == "md" and md.get("device") and set(md.get("members", [])) == names:
        fs = _fs_of(md)
        if fs is None or _ours(fs, probe, settings, {md["device"]}):
            action = "reuse" if fs else "format"
            return {
                "action": action,
                "target": md["device"],
                "refusals": [],
                "wipe": [],
                "uuid": fs and fs["uuid"],
            }
    if layout in ("single", "btrfs"):
        filesystems = [_fs_of(d) for d in devices]
        uuids = {fs["uuid"] for fs in filesystems if fs}
        if len(uuids) == 1 and all(filesystems):
            fs = filesystems[0]
            if _ours(fs, probe, settings, names) and all(
                set(d.get("mounts", [])) <= {settings["mount"]} and not d.get("holders")
                for d in devices
            ):
                return {
                    "action": "reuse",
                    "target": devices[0]["device"],
                    "refusals": [],
                    "wipe": [],
                    "uuid": fs["uuid"],
                }
    if mounted.get("device"):
        refusals.append(
            f"dataset_staging_mount: {settings['mount']} already has {mounted['device']} "
            f"({mounted.get('fstype')}) mounted, not one of dataset_staging_devices; "
            "unmount it first"
        )
    wipe = []
    for device in devices:
        busy = _busy(device)
        refusals.extend(f"dataset_staging_devices: {reason}; not touching it" for reason in busy)
        problems = _blank_problems(device)
        if problems and not busy:
            if settings["force_format"]:
                wipe.append(device["device"])
            else:
                refusals.extend(
                    f"dataset_staging_devices: {problem}; not formatting it "
                    "(dataset_staging_force_format: true erases it)"
                    for problem in problems
                )
    target = None
    if layout == "md":
        target = f"/dev/md/{settings['raid_name']}"
        if md.get("device"):
            refusals.append(
                f"dataset_staging_raid_name: /dev/md/{settings['raid_name']} exists with members "
                f"{', '.join(md.get('members', []))}, not {', '.join(sorted(names))}"
            )
    elif devices:
        target = devices[0]["device"]
    if refusals:
        return {"action": "refuse", "target": target, "refusals": refusals, "wipe": []}
    return {"action": "create", "target": target, "refusals": [], "wipe": wipe}


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


class Validation(RoleAction):
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
