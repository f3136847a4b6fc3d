"""Decisions of the dataset_staging role, as pure functions of the role's variables and of
what the disk probe read on the host, so every refusal is a table row in tests/unit. The
role's validate action (plugins/action/dataset_staging_validate.py) uses them:

dataset_staging_settings(given, os_family)  the variables checked together, normalised:
    {devices, filesystem, layout, mount, datasets: [{name, source, side, dest, ...}], ...};
    Invalid names the variable (dataset_staging_datasets[2].source: ...). Their types, choices
    and the datasets' keys are the role's argument spec's, which the action checks first.
dataset_staging_disk_plan(probe, settings)  {action: none|reuse|create, target,
    refusals: [one line each, naming the device and what was found], wipe: [devices]}
"""

from __future__ import annotations

import os.path
import re

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import parse_size
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

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
