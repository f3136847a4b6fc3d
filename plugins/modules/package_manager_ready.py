#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Wait until no other process holds the package manager's locks; name the holder if one
keeps them past the timeout; finish what an interrupted dpkg left half-configured."""

from __future__ import annotations

DOCUMENTATION = r"""
module: package_manager_ready
short_description: Wait for the package manager's locks, or name who holds them
description:
  - Run right before a role installs packages. On a freshly booted host, apt-daily,
    unattended-upgrades or dnf-makecache hold the package manager's locks for minutes; this
    waits for them up to I(timeout) seconds, then fails with one line naming the lock, the
    process holding it (pid, command, systemd unit) and how to go on.
  - The locks are apt's and dpkg's lock files (held with fcntl, read from /proc/locks), or
    rpm's lock file and dnf's pid files (a pid file counts while its process lives).
  - On apt hosts a dpkg that was killed half way through leaves packages unpacked but not
    configured, and every later apt run stops ("dpkg was interrupted"). With
    I(repair_interrupted) the module runs C(dpkg --configure -a), as that message asks;
    without it, it fails naming the packages.
  - A package killed while dpkg unpacked it is half-installed, flagged reinstall-required, and
    C(dpkg --configure -a) cannot configure it, nor what depends on it. Those packages are
    installed again from the archive (C(apt-get install --reinstall)), then configured.
  - Changes nothing in check mode but reports what it would repair.
options:
  manager:
    description: The host's package manager (Ansible's C(ansible_facts.pkg_mgr)).
    type: str
    required: true
    choices: [apt, dnf, dnf5, yum]
  timeout:
    description: Seconds to wait for the locks to be released; 0 does not wait.
    type: int
    default: 600
  repair_interrupted:
    description: Run C(dpkg --configure -a) when dpkg was interrupted, reinstalling the
      packages it left half-installed first (apt hosts).
    type: bool
    default: true
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Wait for apt-daily and unattended-upgrades to let go of dpkg
  hostcheck.gpu_hosts.package_manager_ready:
    manager: "{{ ansible_facts['pkg_mgr'] }}"
    timeout: 600
"""

RETURN = r"""
waited_s:
  description: Seconds spent waiting for the locks.
  type: float
  returned: always
holders:
  description: Each process seen holding a lock while waiting (pid, command, unit, lock).
  type: list
  elements: dict
  returned: always
repaired:
  description: The packages an interrupted dpkg left unfinished, now installed and configured
    (empty when dpkg was not interrupted).
  type: list
  elements: str
  returned: always
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dpkg_status import (
    QUERY,
    dpkg_states,
)

APT_LOCKS = (
    "/var/lib/dpkg/lock-frontend",
    "/var/lib/dpkg/lock",
    "/var/lib/apt/lists/lock",
    "/var/cache/apt/archives/lock",
)
RPM_LOCKS = ("/var/lib/rpm/.rpm.lock",)
DNF_PID_FILES = (
    "/var/lib/dnf/rpmdb_lock.pid",
    "/var/cache/dnf/metadata_lock.pid",
    "/var/cache/dnf/download_lock.pid",
)
POLL_S = 1.0
BROKEN_STATES = {"H", "U", "F", "W", "t"}


def file_id(path: str) -> str | None:
    """The file as /proc/locks names it: MAJOR:MINOR:INODE (major and minor in hex)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def lock_holders(proc_locks: str, paths, own_pid: int) -> list[tuple[str, int]]:
    """(path, pid) for each lock /proc/locks shows on one of the paths, by another process.
    A line: `1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (a blocked waiter has `->`)."""
    by_id = {file_id(path): path for path in paths}
    by_id.pop(None, None)
    held = []
    for line in proc_locks.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        pid, where = fields[4], fields[5]
        if where in by_id and pid.lstrip("-").isdigit() and int(pid) != own_pid:
            held.append((by_id[where], int(pid)))
    return held


def pid_file_holders(paths, own_pid: int) -> list[tuple[str, int]]:
    """(path, pid) for each dnf pid file naming a live process other than this one."""
    held = []
    for path in paths:
        try:
            with open(path) as handle:
                pid = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid > 0 and pid != own_pid and os.path.exists(f"/proc/{pid}"):
            held.append((path, pid))
    return held


def describe(path: str, pid: int) -> dict:
    """What a lock's holder is: its command and, when systemd started it, its unit."""
    command, unit = "", None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/cgroup") as handle:
            for line in handle:
                leaf = line.strip().rsplit("/", 1)[-1]
                if leaf.endswith((".service", ".scope")) and not leaf.startswith("session-"):
                    unit = leaf
    except OSError:
        pass
    return {"lock": path, "pid": pid, "command": command, "unit": unit}


def holders(manager: str, own_pid: int) -> list[dict]:
    with open("/proc/locks") as handle:
        proc_locks = handle.read()
    if manager == "apt":
        found = lock_holders(proc_locks, APT_LOCKS, own_pid)
    else:
        found = lock_holders(proc_locks, RPM_LOCKS, own_pid)
        found += pid_file_holders(DNF_PID_FILES, own_pid)
    return [describe(path, pid) for path, pid in found]


def still_held_message(holder: dict, manager: str, waited: float) -> str:
    who = f"process {holder['pid']}"
    if holder["command"]:
        who += f" ({holder['command'][:80]})"
    if holder["unit"]:
        who += f" of {holder['unit']}"
    stop = f"systemctl stop {holder['unit']}" if holder["unit"] else f"kill {holder['pid']}"
    return (
        f"the {manager} lock {holder['lock']} is still held by {who} after {waited:.0f} s: "
        f"let it finish and run again (or raise the role's package lock timeout), or stop "
        f"it ({stop}) if it hangs"
    )


def wait_for_locks(manager: str, timeout: float, clock=time.monotonic, sleep=time.sleep):
    """(seconds waited, every holder seen, the holders left after the timeout)."""
    own_pid, start, seen = os.getpid(), clock(), {}
    while True:
        current = holders(manager, own_pid)
        for holder in current:
            seen.setdefault((holder["lock"], holder["pid"]), holder)
        waited = clock() - start
        if not current or waited >= timeout:
            return waited, list(seen.values()), current
        sleep(min(POLL_S, max(timeout - waited, 0.0)))


def needs_reinstall(dpkg_status: str) -> list[str]:
    """The packages dpkg cannot configure until they are unpacked again: half-installed, or
    flagged reinstall-required."""
    return [name for name, state, flag in dpkg_states(dpkg_status) if state == "H" or flag == "R"]


def dpkg_error(output: str) -> str:
    """dpkg's first error with its reason (the indented lines under it), else the last line."""
    lines = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith("dpkg: error processing"):
            reason = []
            for more in lines[index + 1 :]:
                if not more.startswith(" "):
                    break
                reason.append(more.strip())
            return " ".join([line, *reason])
    return lines[-1].strip() if lines else ""


def repair(module, result: dict) -> None:
    """dpkg --configure -a; where it stops at half-installed packages, apt installs them
    again from the archive, and dpkg --configure -a finishes the rest."""
    noninteractive = {"DEBIAN_FRONTEND": "noninteractive"}
    configure = ["dpkg", "--configure", "-a"]
    rc, out, err = module.run_command(configure, environ_update=noninteractive)
    if rc == 0:
        return
    dummy, status, dummy = module.run_command(QUERY)
    again = needs_reinstall(status)
    if not again:
        module.fail_json(
            msg=f"dpkg was interrupted and dpkg --configure -a failed (exit {rc}): "
            f"{dpkg_error(err + out)}",
            **result,
        )
    reinstall = ["apt-get", "install", "--reinstall", "-y", "-q"]
    reinstall += ["-o", "Dpkg::Options::=--force-confold", *again]
    rc, out, err = module.run_command(reinstall, environ_update=noninteractive)
    if rc == 0:
        rc, out, err = module.run_command(configure, environ_update=noninteractive)
    if rc != 0:
        module.fail_json(
            msg=f"dpkg was interrupted half way through unpacking {', '.join(again)}, and "
            f"installing them again failed (exit {rc}): {dpkg_error(err + out)}",
            **result,
        )


def half_configured(dpkg_status: str) -> list[str]:
    """The packages a killed dpkg left unfinished, from dpkg_status.QUERY's output: state
    half-installed, unpacked, half-configured or awaiting triggers, or the reinstall-required
    flag."""
    return [
        name
        for name, state, flag in dpkg_states(dpkg_status)
        if state in BROKEN_STATES or flag == "R"
    ]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "manager": {"type": "str", "required": True, "choices": ["apt", "dnf", "dnf5", "yum"]},
            "timeout": {"type": "int", "default": 600},
            "repair_interrupted": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    manager, timeout = module.params["manager"], module.params["timeout"]
    if timeout < 0:
        module.fail_json(msg=f"timeout: {timeout} is negative (seconds to wait, 0 or more)")
    waited, seen, left = wait_for_locks(manager, float(timeout))
    result = {"changed": False, "waited_s": round(waited, 1), "holders": seen, "repaired": []}
    if left:
        module.fail_json(msg=still_held_message(left[0], manager, waited), **result)
    if manager == "apt":
        dummy, out, dummy = module.run_command(QUERY)
        broken = half_configured(out)
        if broken and not module.params["repair_interrupted"]:
            module.fail_json(
                msg=f"dpkg was interrupted: {', '.join(broken)} not fully installed; run "
                "dpkg --configure -a (or let the role: repair_interrupted)",
                **result,
            )
        if broken:
            result.update(changed=True, repaired=broken)
            if not module.check_mode:
                repair(module, result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
