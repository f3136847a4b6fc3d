#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Refuse, before any role changes anything, a file system the roles write to that is full:
a converge on a full root fails half way, with some files new and others old."""

from __future__ import annotations

DOCUMENTATION = r"""
module: free_space_ready
short_description: Refuse a full file system before the roles write to it
description:
  - The roles write configuration under /etc, packages under /usr, /var/lib and /var/cache,
    and the training venv. On a full file system a converge fails in the middle, with some
    files new and others old, and Ansible's error names a temporary file, not the full file
    system.
  - This module reads, for each path, the file system it is on (the nearest folder that
    exists, as the roles create the rest) with statvfs, and fails with one line naming the
    first file system with less than O(min_free) available (as C(df) shows it, without the
    blocks reserved for root) or with no free inodes, and how to fix it.
  - It changes nothing. Paths on one file system are read once.
options:
  paths:
    description: The absolute paths the roles write, each with what they write there.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: An absolute path; it need not exist yet.
        type: path
        required: true
      what:
        description: What the roles write there, named in the message.
        type: str
        required: true
      set_by:
        description: The variable that gave the path, named when the path is not absolute.
        type: str
        default: ""
  min_free:
    description:
      - The least space each file system must have available, a size such as C(256MiB) or a
        byte count; 0 checks only that inodes are left.
    type: raw
    required: true
  variable:
    description: The variable that sets O(min_free), named in the message as a way out.
    type: str
    default: provision_min_free_space
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Refuse a full file system before any role changes anything
  hostcheck.gpu_hosts.free_space_ready:
    paths:
      - {path: /etc, what: configuration}
      - {path: "{{ training_venv }}", what: the training venv}
    min_free: 256MiB
"""

RETURN = r"""
file_systems:
  description: Each file system the paths are on, in the order of the paths.
  type: list
  elements: dict
  returned: always
  contains:
    mount_point:
      description: Where the file system is mounted.
      type: str
    free:
      description: Bytes available (statvfs f_bavail times f_frsize).
      type: int
    free_inodes:
      description: Inodes available; null where the file system does not count them.
      type: int
    paths:
      description: The paths on it, as given.
      type: list
      elements: str
    short:
      description: Whether it has less than min_free available or no free inode.
      type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.mountinfo import (
    parse_mountinfo,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.root_trust import (
    nearest_existing,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import (
    format_size,
    parse_size,
)


def mount_point(path: str, mount_points: list[str]) -> str:
    """The longest mount point that holds path (an existing, resolved path)."""
    holding = [m for m in mount_points if path == m or path.startswith(m.rstrip("/") + "/")]
    return max(holding, key=len, default="/")


def file_systems(paths: list[dict], min_free: int, mount_points: list[str]) -> list[dict]:
    """The file systems the paths are on (one entry each, in the order of the paths)."""
    found: dict[int, dict] = {}
    for entry in paths:
        existing = nearest_existing(os.path.realpath(entry["path"]))
        device = os.stat(existing).st_dev
        if device not in found:
            stats = os.statvfs(existing)
            free = stats.f_bavail * stats.f_frsize
            # tmpfs without nr_inodes, btrfs and others report no inode count (f_files 0)
            inodes = stats.f_favail if stats.f_files else None
            found[device] = {
                "mount_point": mount_point(existing, mount_points),
                "free": free,
                "free_inodes": inodes,
                "paths": [],
                "what": [],
                "short": free < min_free or inodes == 0,
            }
        if entry["path"] not in found[device]["paths"]:  # hostcheck's venv is the training venv
            found[device]["paths"].append(entry["path"])
            found[device]["what"].append(entry["what"])
    return list(found.values())


def refusal(system: dict, min_free: int, variable: str) -> str:
    what = ", ".join(f"{w} ({p})" for w, p in zip(system["what"], system["paths"]))
    if system["free_inodes"] == 0:
        lack = "no free inodes"
        need = "at least one free inode"
    else:
        lack = f"{format_size(system['free'])} free"
        need = f"at least {format_size(min_free)}"
    return (
        f"the file system at {system['mount_point']} is full: it has {lack}, and the roles need "
        f"{need} there to write {what}: free space there (df -h {system['mount_point']}) and "
        f"run again (or lower {variable})"
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "what": {"type": "str", "required": True},
                    "set_by": {"type": "str", "default": ""},
                },
            },
            "min_free": {"type": "raw", "required": True},
            "variable": {"type": "str", "default": "provision_min_free_space"},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        min_free = parse_size(params["min_free"])
    except ValueError as error:
        module.fail_json(msg=f"{params['variable']}: {error}")
    for entry in params["paths"]:
        if not os.path.isabs(entry["path"]):
            named = entry["set_by"] or "free_space_ready"
            module.fail_json(msg=f"{named}: {entry['path']} is not an absolute path")
    with open("/proc/self/mountinfo") as handle:
        mount_points = [m["mount_point"] for m in parse_mountinfo(handle.read())]
    systems = file_systems(params["paths"], min_free, mount_points)
    result = [{k: v for k, v in s.items() if k != "what"} for s in systems]
    short = [s for s in systems if s["short"]]
    if short:
        module.fail_json(msg=refusal(short[0], min_free, params["variable"]), file_systems=result)
    module.exit_json(changed=False, file_systems=result)


if __name__ == "__main__":
    main()
