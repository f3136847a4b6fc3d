#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Read-only probe of the disks the dataset_staging role was given: what each holds and who
uses it. The decisions are in plugins/plugin_utils/dataset_staging_rules.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: dataset_disk_probe
short_description: Read what is on the staging disks and who uses them, change nothing
description:
  - Expands the device paths and patterns (globs under /dev/disk/by-id; partition links
    ending in -partN are left out of patterns) to whole block devices, one entry per disk.
  - For each disk, the signatures wipefs finds (file systems, RAID members, partition
    tables), its partitions, where it or a partition is mounted, swap, and holders (md, dm).
  - What is mounted at the mount point, its fstab line, and the md array of that name.
options:
  devices:
    description: Device paths or glob patterns.
    type: list
    elements: str
    required: true
  mount:
    description: The staging mount point.
    type: path
    required: true
  raid_name:
    description: Name of the md array (/dev/md/NAME).
    type: str
    default: data
  fstab:
    description: The fstab to read.
    type: path
    default: /etc/fstab
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read the data disks and the mount point (changes nothing)
  hostcheck.gpu_hosts.dataset_disk_probe:
    devices: [/dev/nvme1n1, /dev/nvme2n1]
    mount: /data
    raid_name: data
  register: disks
"""

RETURN = r"""
devices:
  description: >-
    One entry per disk: path (as given or matched), device (/dev/NAME), name, size (bytes),
    signatures [{type, offset, uuid, label, usage}], partitions, mounts, swap, holders.
  type: list
  returned: always
unmatched:
  description: Patterns or paths that matched no existing device.
  type: list
  returned: always
problems:
  description: Entries that are not whole block devices, one message each.
  type: list
  returned: always
mounted_at_mount:
  description: What is mounted at the mount point now, {device, fstype}, or empty.
  type: dict
  returned: always
fstab:
  description: The fstab line for the mount point, {src, fstype, opts}, or empty.
  type: dict
  returned: always
md:
  description: The md array /dev/md/NAME when it exists, {device, members, signatures}.
  type: dict
  returned: always
mount_entries:
  description: Number of entries in the mount point folder when nothing is mounted there.
  type: int
  returned: always
"""

import contextlib
import glob
import json
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.mountinfo import parse_mountinfo

_PARTITION_LINK = re.compile(r"-part[0-9]+$")
_GLOB = re.compile(r"[*?\[]")
SYS_BLOCK = "/sys/class/block"


def expand(patterns: list[str]) -> tuple[list[str], list[str]]:
    """Paths matched by each pattern, in order, each disk once; and what matched nothing."""
    found, unmatched, seen = [], [], set()
    for pattern in patterns:
        if _GLOB.search(pattern):
            paths = [p for p in sorted(glob.glob(pattern)) if not _PARTITION_LINK.search(p)]
        else:
            paths = [pattern] if os.path.exists(pattern) else []
        if not paths:
            unmatched.append(pattern)
        for path in paths:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                found.append(path)
    return found, unmatched


def _read(path: str, default: str = "") -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return default


def _mountinfo() -> list[dict]:
    return [
        {
            "majmin": f"{mount['major']}:{mount['minor']}",
            "target": mount["mount_point"],
            "fstype": mount["fs_type"],
            "source": mount["source"],
        }
        for mount in parse_mountinfo(_read("/proc/self/mountinfo"))
    ]


def _swaps() -> set[str]:
    lines = _read("/proc/swaps").splitlines()[1:]
    return {os.path.realpath(line.split()[0]) for line in lines if line.split()}


def partitions_of(name: str) -> list[str]:
    folder = f"{SYS_BLOCK}/{name}"
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return []
    return [entry for entry in entries if os.path.exists(f"{folder}/{entry}/partition")]


def signatures(module: AnsibleModule, device: str) -> list[dict]:
    rc, out, err = module.run_command(
        ["wipefs", "--no-act", "--json", "--output", "DEVICE,OFFSET,TYPE,UUID,LABEL,USAGE", device]
    )
    if rc != 0:
        module.fail_json(msg=f"wipefs could not read {device}: {err.strip() or out.strip()}")
    if not out.strip():
        return []
    return [
        {key: entry.get(key) or "" for key in ("type", "offset", "uuid", "label", "usage")}
        for entry in json.loads(out).get("signatures", [])
    ]


def describe(module: AnsibleModule, path: str, mounts: list[dict], swaps: set[str]) -> dict | str:
    """The facts of one disk, or a message saying why it is not one."""
    real = os.path.realpath(path)
    if not stat.S_ISBLK(os.stat(real).st_mode):
        return f"{path} is not a block device"
    name = os.path.basename(real)
    if os.path.exists(f"{SYS_BLOCK}/{name}/partition"):
        return f"{path} ({real}) is a partition; give whole disks"
    parts = partitions_of(name)
    own = {f"/dev/{n}" for n in [name, *parts]}
    numbers = {_read(f"{SYS_BLOCK}/{n}/dev") for n in [name, *parts]}
    holders = []
    for item in [name, *parts]:
        with contextlib.suppress(OSError):
            holders.extend(sorted(os.listdir(f"{SYS_BLOCK}/{item}/holders")))
    return {
        "path": path,
        "device": real,
        "name": name,
        "size": int(_read(f"{SYS_BLOCK}/{name}/size", "0") or 0) * 512,
        "signatures": signatures(module, real),
        "partitions": parts,
        "mounts": sorted(
            {
                m["target"]
                for m in mounts
                if m["majmin"] in numbers
                or (m["source"].startswith("/dev/") and os.path.realpath(m["source"]) in own)
            }
        ),
        "swap": bool(own & swaps),
        "holders": sorted(set(holders)),
    }


def fstab_line(path: str, mount: str) -> dict:
    for line in _read(path).splitlines():
        fields = line.split()
        if (
            len(fields) >= 4
            and not fields[0].startswith("#")
            and os.path.normpath(fields[1]) == mount
        ):
            return {"src": fields[0], "fstype": fields[2], "opts": fields[3]}
    return {}


def md_array(module: AnsibleModule, raid_name: str) -> dict:
    link = f"/dev/md/{raid_name}"
    if not os.path.exists(link):
        return {}
    real = os.path.realpath(link)
    name = os.path.basename(real)
    try:
        members = sorted(f"/dev/{m}" for m in os.listdir(f"{SYS_BLOCK}/{name}/slaves"))
    except OSError:
        members = []
    return {"device": real, "members": members, "signatures": signatures(module, real)}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "devices": {"type": "list", "elements": "str", "required": True},
            "mount": {"type": "path", "required": True},
            "raid_name": {"type": "str", "default": "data"},
            "fstab": {"type": "path", "default": "/etc/fstab"},
        },
        supports_check_mode=True,
    )
    mount = os.path.normpath(module.params["mount"])
    paths, unmatched = expand(module.params["devices"])
    try:
        mounts, swaps = _mountinfo(), _swaps()
    except ValueError as exc:  # a mountinfo line this parser cannot read
        module.fail_json(msg=str(exc))
    devices, problems = [], []
    for path in paths:
        facts = describe(module, path, mounts, swaps)
        (problems.append if isinstance(facts, str) else devices.append)(facts)
    at_mount = [m for m in mounts if m["target"] == mount]
    mounted = {}
    if at_mount:
        source = at_mount[-1]["source"]
        mounted = {
            "device": os.path.realpath(source) if source.startswith("/dev/") else source,
            "fstype": at_mount[-1]["fstype"],
        }
    entries = 0
    if not mounted and os.path.isdir(mount):
        entries = len(os.listdir(mount))
    module.exit_json(
        changed=False,
        devices=devices,
        unmatched=unmatched,
        problems=problems,
        mounted_at_mount=mounted,
        fstab=fstab_line(module.params["fstab"], mount),
        md=md_array(module, module.params["raid_name"]),
        mount_entries=entries,
    )


if __name__ == "__main__":
    main()
