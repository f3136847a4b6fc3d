#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Read-only probe of /dev/shm for the shm role: the live mount, its fstab lines and the RAM a
percentage is taken of, in one module call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: shm_probe
short_description: Read /dev/shm as mounted and as fstab has it, and MemTotal, change nothing
description:
  - The mount at I(path) (the topmost of /proc/self/mountinfo), its file system type, source and
    options (those of the mount and of the super block, as findmnt shows them), and its size
    and use in bytes (statvfs, as df and findmnt count them).
  - Every line of I(fstab) for I(path), its fields as written.
  - MemTotal of /proc/meminfo in KiB, which a percentage size= of a tmpfs is taken of.
  - The shm role's validate action decides from this whether fstab or the mount must change;
    its verify action compares it with shm_size.
options:
  path:
    description: The mount point.
    type: path
    default: /dev/shm
  fstab:
    description: The fstab to read.
    type: path
    default: /etc/fstab
  mountinfo:
    description: The mount table to read (tests point it at a fixture).
    type: path
    default: /proc/self/mountinfo
  meminfo:
    description: Where MemTotal is read (tests point it at a fixture).
    type: path
    default: /proc/meminfo
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read /dev/shm as mounted and as fstab has it (changes nothing)
  hostcheck.gpu_hosts.shm_probe:
  register: shm
"""

RETURN = r"""
live:
  description: >-
    The mount at path, {fstype, source, options, size, used} (sizes in bytes), or null when
    nothing is mounted there.
  type: dict
  returned: always
fstab:
  description: >-
    The fstab lines for path, in file order, each {src, fstype, options, dump, passno}; dump
    and passno are null where the line leaves them out.
  type: list
  returned: always
memtotal_kib:
  description: MemTotal of /proc/meminfo in KiB (null when it cannot be read).
  type: int
  returned: always
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.mountinfo import (
    parse_mountinfo,
    unescape,
)

MEMTOTAL = re.compile(r"^MemTotal:\s+(\d+)\s+kB", re.MULTILINE)


def read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def live_mount(mountinfo_text: str, path: str) -> dict | None:
    at_path = [m for m in parse_mountinfo(mountinfo_text) if m["mount_point"] == path]
    if not at_path:
        return None
    top = at_path[-1]
    options = list(dict.fromkeys(top["options"] + top["super_options"]))
    found = {
        "fstype": top["fs_type"],
        "source": top["source"],
        "options": options,
        "size": 0,
        "used": 0,
    }
    try:
        usage = os.statvfs(path)
    except OSError:
        return found
    found["size"] = usage.f_blocks * usage.f_frsize
    found["used"] = (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    return found


def fstab_lines(fstab_text: str, path: str) -> list[dict]:
    lines = []
    for line in fstab_text.splitlines():
        fields = line.split("#")[0].split()
        if len(fields) < 4 or os.path.normpath(unescape(fields[1])) != path:
            continue
        lines.append(
            {
                "src": fields[0],
                "fstype": fields[2],
                "options": fields[3],
                "dump": fields[4] if len(fields) > 4 else None,
                "passno": fields[5] if len(fields) > 5 else None,
            }
        )
    return lines


def memtotal_kib(meminfo_text: str) -> int | None:
    match = MEMTOTAL.search(meminfo_text)
    return int(match.group(1)) if match else None


def probe(params: dict) -> dict:
    path = os.path.normpath(params["path"])
    return {
        "live": live_mount(read(params["mountinfo"]), path),
        "fstab": fstab_lines(read(params["fstab"]), path),
        "memtotal_kib": memtotal_kib(read(params["meminfo"])),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/dev/shm"},
            "fstab": {"type": "path", "default": "/etc/fstab"},
            "mountinfo": {"type": "path", "default": "/proc/self/mountinfo"},
            "meminfo": {"type": "path", "default": "/proc/meminfo"},
        },
        supports_check_mode=True,
    )
    try:
        found = probe(module.params)
    except ValueError as exc:  # a mountinfo line the parser cannot read
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()
