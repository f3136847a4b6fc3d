#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Read-only probe of a host for the ulimits role: files, their owners and modes, fresh logins
and systemd's DefaultLimit*, in one module call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ulimits_probe
short_description: Read what the ulimits role needs to know about a host, changing nothing
description:
  - Reads files (a folder stands for every file directly in it), the owner and mode of
    paths, whether systemd runs (/run/systemd/system is a folder), the limits a fresh PAM
    login of each named user gets (C(runuser -l USER) reading /proc/self/limits), and the
    properties of the systemd manager (C(systemctl show), only where systemd runs).
  - The ulimits role's validate action reads fs.nr_open, the limits of PID 1, its own
    capabilities, the PAM stacks, the role's limits.d file and system.conf.d drop-in with it;
    the role's verify action reads the logins and the manager's DefaultLimit* as well.
options:
  read:
    description: Files to read; a folder reads every regular file directly in it.
    type: list
    elements: path
    default: []
  stat:
    description: Paths whose type, owner and mode to return.
    type: list
    elements: path
    default: []
  logins:
    description: Users to open a fresh PAM login for (runuser -l), reading /proc/self/limits.
    type: list
    elements: str
    default: []
  systemctl_show:
    description: Properties of the systemd manager to read (systemctl show), where systemd runs.
    type: list
    elements: str
    default: []
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read the limits.d file and how fresh logins of root and nobody are limited
  hostcheck.gpu_hosts.ulimits_probe:
    read: [/etc/security/limits.d/90-hostcheck-training.conf]
    logins: [root, nobody]
"""

RETURN = r"""
files:
  description: >-
    Text of each file read ({path: text}); paths that do not exist are left out.
  type: dict
  returned: always
stat:
  description: >-
    Per path asked for: type (file, directory, other, or null where it does not exist),
    uid, gid and mode ("0644").
  type: dict
  returned: always
systemd:
  description: Whether systemd is the init system here (/run/systemd/system is a folder).
  type: bool
  returned: always
logins:
  description: >-
    Per user: exists (in the passwd database), and for users that exist the rc, stdout (the
    login's /proc/self/limits) and stderr of runuser -l.
  type: dict
  returned: always
systemctl_show:
  description: rc, stdout and stderr of systemctl show; null where systemd does not run or
    no property was asked for.
  type: dict
  returned: always
"""

import os
import pwd
import stat as stat_module
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.host_files import read_text

SYSTEMD_RUNNING = "/run/systemd/system"
LOGIN_COMMAND = "cat /proc/self/limits"
TIMEOUT = 60


def read_files(paths: list, root: str = "") -> dict:
    """{path: text} of every file named, a folder standing for the regular files in it."""
    found = {}
    for path in paths:
        if os.path.isdir(root + path):
            for name in sorted(os.listdir(root + path)):
                inner = os.path.join(path, name)
                if os.path.isfile(root + inner):
                    found[inner] = read_text(root + inner)
        elif os.path.isfile(root + path):
            found[path] = read_text(root + path)
    return {path: text for path, text in found.items() if text is not None}


def stat_paths(paths: list, root: str = "") -> dict:
    found = {}
    for path in paths:
        try:
            info = os.stat(root + path)
        except OSError:
            found[path] = {"type": None}
            continue
        kind = (
            "file"
            if stat_module.S_ISREG(info.st_mode)
            else "directory"
            if stat_module.S_ISDIR(info.st_mode)
            else "other"
        )
        found[path] = {
            "type": kind,
            "uid": info.st_uid,
            "gid": info.st_gid,
            "mode": f"{stat_module.S_IMODE(info.st_mode):04o}",
        }
    return found


def run(argv: list) -> dict:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "stdout": "", "stderr": str(exc)}
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def login(user: str) -> dict:
    """What a fresh PAM login of `user` gets: pam_limits runs in runuser-l's session stack."""
    try:
        pwd.getpwnam(user)
    except KeyError:
        return {"exists": False}
    return {"exists": True, **run(["runuser", "-l", "-s", "/bin/sh", "-c", LOGIN_COMMAND, user])}


def probe(params: dict, root: str = "", login=login) -> dict:
    systemd = os.path.isdir(root + SYSTEMD_RUNNING)
    properties = params["systemctl_show"]
    return {
        "files": read_files(params["read"], root),
        "stat": stat_paths(params["stat"], root),
        "systemd": systemd,
        "logins": {user: login(user) for user in dict.fromkeys(params["logins"])},
        "systemctl_show": (
            run(["systemctl", "show", "--property=" + ",".join(properties)])
            if systemd and properties
            else None
        ),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "read": {"type": "list", "elements": "path", "default": []},
            "stat": {"type": "list", "elements": "path", "default": []},
            "logins": {"type": "list", "elements": "str", "default": []},
            "systemctl_show": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **probe(module.params))


if __name__ == "__main__":
    main()
