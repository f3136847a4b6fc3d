#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Read-only probe of a host's kernel tunables for the sysctl_tuning role."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sysctl_tuning_probe
short_description: Read what the sysctl_tuning role needs to know about a host's kernel
description:
  - Reads, and never changes, whether the host runs its own kernel (or shares the kernel of
    the controller or of a container host), whether /proc/sys and /sys are writable, the
    current and the boot-time value of each named sysctl, the cpufreq governors and the
    transparent huge page modes.
  - The kernel counts as shared when the host's boot_id equals the controller's while the
    host is not the controller itself (other PID or mount namespace), when a container
    marker is present (/.dockerenv, /run/.containerenv, /run/systemd/container,
    container= in PID 1's environment, systemd-detect-virt --container), or when PID 1
    is not an init system.
options:
  names:
    description: sysctl names (dotted, as in sysctl.d) to read.
    type: list
    elements: str
    default: []
  controller_boot_id:
    description: The controller's /proc/sys/kernel/random/boot_id; empty when unknown.
    type: str
    default: ""
  controller_namespaces:
    description: The controller's "pid:[N] mnt:[N]" (readlink /proc/self/ns/pid, mnt).
    type: str
    default: ""
  own_file:
    description: The role's sysctl.d file; overridden_by lists what other files set after it.
    type: path
    default: /etc/sysctl.d/90-hostcheck-training.conf
  files:
    description: Files to read back (the role's own files); missing ones come back as null.
    type: list
    elements: path
    default: []
  stat:
    description: Paths whose mode and owner to read (the role's boot files and folders).
    type: list
    elements: path
    default: []
  units:
    description: systemd units whose load, active and enablement state to read (systemctl show).
    type: list
    elements: str
    default: []
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read the sysctls and the role's files (changes nothing)
  hostcheck.gpu_hosts.sysctl_tuning_probe:
    names: [vm.swappiness, vm.max_map_count]
  register: kernel
"""

RETURN = r"""
shared:
  description: Why the kernel is not this host's own (empty list when it is).
  type: list
  returned: always
live_sysctl_blockers:
  description: shared, plus "/proc/sys is read-only" where it is; empty means set sysctls live.
  type: list
  returned: always
live_sys_blockers:
  description: shared, plus "/sys is read-only" where it is; empty means set governor and THP.
  type: list
  returned: always
sysctl:
  description: >-
    Per name: exists, writable (a write bit in its mode), value (fields joined by one space),
    boot (the value the boot-time files leave, with the file that sets it), set_by (every
    file and value, in the order applied) and overridden_by (what other files set after
    own_file, so wins at boot).
  type: dict
  returned: always
files:
  description: Text of each file asked for, null where it does not exist.
  type: dict
  returned: always
stat:
  description: >-
    Per path asked for, {mode (octal, as "0644"), uid, gid, directory}; null where it does not
    exist (symbolic links followed).
  type: dict
  returned: always
units:
  description: >-
    Per unit asked for, {LoadState, ActiveState, UnitFileState} as systemctl show prints them;
    empty where systemd does not run.
  type: dict
  returned: always
"""

import fnmatch
import glob
import os
import shutil
import stat
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.cpus import (
    CPU_DIR,
    cpufreq_governors,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.host_files import read_text
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sysctl import (
    PROC_SYS,
    proc_path,
    sysctl_file_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.thp import (
    THP_DIR,
    parse_bracketed,
)

# Init systems a host boots with; anything else as PID 1 (tini, dumb-init, sh, sshd,
# sleep, a training script) is a container's entry point.
INITS = ("systemd", "init", "upstart", "openrc-init", "runit", "runit-init", "s6-svscan")
# The order systemd-sysctl and `sysctl --system` read sysctl.d files in: by file name over
# all directories, a name in an earlier directory hiding the same name in later ones.
SYSCTL_DIRS = (
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
)
# `sysctl --system` reads it last; systemd-sysctl through the 99-sysctl.conf link distros ship.
SYSCTL_CONF = "/etc/sysctl.conf"


def read(path: str, root: str = "") -> str | None:
    return read_text(root + path)


def sysctl_files(own_file: str, root: str = "") -> list[str]:
    """The files read at boot, in order, with own_file in its place even before it exists."""
    by_name: dict[str, str] = {}
    for directory in SYSCTL_DIRS:
        if directory == os.path.dirname(own_file):
            by_name.setdefault(os.path.basename(own_file), own_file)
        for path in sorted(glob.glob(f"{root}{directory}/*.conf")):
            by_name.setdefault(os.path.basename(path), path[len(root) :])
    files = [by_name[name] for name in sorted(by_name)]
    seen = {os.path.realpath(root + f) for f in files}
    if os.path.isfile(root + SYSCTL_CONF) and os.path.realpath(root + SYSCTL_CONF) not in seen:
        files.append(SYSCTL_CONF)
    return files


def sysctl_state(names: list[str], own_file: str, root: str = "") -> dict[str, dict]:
    """Per name: the kernel's value and mode, and every boot-time line that sets it."""
    files = sysctl_files(own_file, root)
    set_by: dict[str, list[list[str]]] = {name: [] for name in names}
    after_own: dict[str, list[list[str]]] = {name: [] for name in names}
    passed_own = False
    for path in files:
        if path == own_file:
            passed_own = True
        text = read(path, root)
        if text is None or os.path.realpath(root + path) == "/dev/null":
            continue  # masked (a link to /dev/null) or not there
        for key, value in sysctl_file_settings(text):
            for name in names:
                if key == name or (any(c in key for c in "*?[") and fnmatch.fnmatch(name, key)):
                    set_by[name].append([path, value])
                    if passed_own and path != own_file:
                        after_own[name].append([path, value])
    state = {}
    for name in names:
        try:
            path = proc_path(name)
            mode = os.stat(root + path).st_mode
            exists = os.path.isfile(root + path)
        except (ValueError, OSError):
            path, mode, exists = "", 0, False
        text = read(path, root) if exists else None
        last = set_by[name][-1] if set_by[name] else None
        state[name] = {
            "exists": exists,
            "writable": bool(mode & 0o222),
            "value": " ".join(text.split()) if text is not None else None,
            "boot": {"file": last[0], "value": last[1]} if last else None,
            "set_by": set_by[name],
            "overridden_by": after_own[name],
        }
    return state


def bracketed(text: str | None) -> dict | None:
    """'always [madvise] never' -> {selected: madvise, options: [always, madvise, never]}."""
    if text is None:
        return None
    selected, options = parse_bracketed(text)
    return {"selected": selected, "options": options}


def cpufreq_state(root: str = "") -> dict:
    """The governor of every CPU with cpufreq, and the governors all of them offer (null when
    a driver does not say)."""
    paths = sorted(glob.glob(f"{root}{CPU_DIR}/cpu[0-9]*/cpufreq/scaling_governor"))
    names = [path.split("/")[-3] for path in paths]
    cpus = [int(name[3:]) for name in names if name[3:].isdigit()]
    governors = cpufreq_governors(lambda path: read(path, root), cpus)
    available: set[str] | None = None
    unknown = False
    for cpu in governors:
        offered = read(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_available_governors", root)
        if offered is None:
            unknown = True
            continue
        words = set(offered.split())
        available = words if available is None else available & words
    return {
        "present": bool(governors),
        "governors": {f"cpu{cpu}": governor for cpu, governor in governors.items()},
        "available": None if unknown or available is None else sorted(available),
        "paths": [f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_governor" for cpu in governors],
    }


def thp_state(root: str = "") -> dict:
    return {
        "present": os.path.isfile(f"{root}{THP_DIR}/enabled"),
        "enabled": bracketed(read(f"{THP_DIR}/enabled", root)),
        "defrag": bracketed(read(f"{THP_DIR}/defrag", root)),
    }


def read_only(path: str, root: str = "") -> bool:
    try:
        return bool(os.statvfs(root + path).f_flag & os.ST_RDONLY)
    except OSError:
        return True


def namespaces(root: str = "") -> str:
    parts = []
    for kind in ("pid", "mnt"):
        try:
            parts.append(os.readlink(f"{root}/proc/self/ns/{kind}"))
        except OSError:
            parts.append(f"{kind}:?")
    return " ".join(parts)


def detect_virt_container() -> str | None:
    """systemd-detect-virt --container where it is installed: the container type or None."""
    tool = shutil.which("systemd-detect-virt")
    if tool is None:
        return None
    done = subprocess.run(
        [tool, "--container"], capture_output=True, text=True, check=False, timeout=10
    )
    word = done.stdout.strip()
    return word if done.returncode == 0 and word and word != "none" else None


def shared_reasons(
    controller_boot_id: str,
    controller_namespaces: str,
    root: str = "",
    detect_virt=detect_virt_container,
) -> list[str]:
    """Why this host's kernel is not its own: empty when nothing says so."""
    reasons = []
    boot_id = (read("/proc/sys/kernel/random/boot_id", root) or "").strip()
    here = namespaces(root)
    if boot_id and boot_id == controller_boot_id.strip() and here != controller_namespaces.strip():
        reasons.append(
            f"boot_id {boot_id} equals the controller's: this host runs on the "
            "controller's kernel (a container or namespace on the controller)"
        )
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if os.path.exists(root + marker):
            reasons.append(f"{marker} exists (a container)")
    container = (read("/run/systemd/container", root) or "").strip()
    if container:
        reasons.append(f"/run/systemd/container says {container}")
    environ = read("/proc/1/environ", root) or ""
    for entry in environ.split("\0"):
        if entry.startswith("container=") and entry != "container=":
            reasons.append(f"PID 1 runs with {entry}")
    virt = detect_virt()
    if virt:
        reasons.append(f"systemd-detect-virt --container says {virt}")
    init = (read("/proc/1/comm", root) or "").strip()
    if init and init not in INITS:
        reasons.append(f"PID 1 is {init}, not an init system (a container's entry point)")
    return reasons


def path_stat(path: str, root: str = "") -> dict | None:
    try:
        found = os.stat(root + path)
    except OSError:
        return None
    return {
        "mode": f"{stat.S_IMODE(found.st_mode):04o}",
        "uid": found.st_uid,
        "gid": found.st_gid,
        "directory": stat.S_ISDIR(found.st_mode),
    }


UNIT_PROPERTIES = ("LoadState", "ActiveState", "UnitFileState")


def systemctl_show(names: list[str]) -> str:
    """systemctl show of the units' UNIT_PROPERTIES: one block per unit, in the order asked."""
    tool = shutil.which("systemctl")
    if tool is None:
        return ""
    done = subprocess.run(
        [tool, "show", "--no-pager", f"--property={','.join(UNIT_PROPERTIES)}", "--", *names],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return done.stdout if done.returncode == 0 else ""


def unit_states(names: list[str], systemd: bool, show=systemctl_show) -> dict[str, dict]:
    if not names or not systemd:
        return {}
    blocks = [block for block in show(names).strip().split("\n\n") if block.strip()]
    if len(blocks) != len(names):
        return {}
    return {
        name: dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        for name, block in zip(names, blocks)
    }


def probe(
    params: dict, root: str = "", detect_virt=detect_virt_container, show_units=systemctl_show
) -> dict:
    shared = shared_reasons(
        params["controller_boot_id"], params["controller_namespaces"], root, detect_virt
    )
    # what systemd's ConditionVirtualization=container sees
    container = (read("/run/systemd/container", root) or "").strip()
    proc_ro = read_only(PROC_SYS, root)
    sys_ro = read_only("/sys", root)
    names = list(dict.fromkeys(params["names"]))
    tuned_active = read("/etc/tuned/active_profile", root)
    systemd = os.path.isdir(root + "/run/systemd/system")
    return {
        "boot_id": (read("/proc/sys/kernel/random/boot_id", root) or "").strip(),
        "namespaces": namespaces(root),
        "shared": shared,
        "proc_sys_read_only": proc_ro,
        "sys_read_only": sys_ro,
        "live_sysctl_blockers": shared + (["/proc/sys is read-only"] if proc_ro else []),
        "live_sys_blockers": shared + (["/sys is read-only"] if sys_ro else []),
        "systemd": systemd,
        "systemd_container": container,
        "sysctl": sysctl_state(names, params["own_file"], root),
        "cpufreq": cpufreq_state(root),
        "thp": thp_state(root),
        "tuned_active_profile": tuned_active.strip() if tuned_active is not None else None,
        "files": {path: read(path, root) for path in params["files"]},
        "stat": {path: path_stat(path, root) for path in params.get("stat", [])},
        "units": unit_states(list(dict.fromkeys(params.get("units", []))), systemd, show_units),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "default": []},
            "controller_boot_id": {"type": "str", "default": ""},
            "controller_namespaces": {"type": "str", "default": ""},
            "own_file": {"type": "path", "default": "/etc/sysctl.d/90-hostcheck-training.conf"},
            "files": {"type": "list", "elements": "path", "default": []},
            "stat": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **probe(module.params))


if __name__ == "__main__":
    main()
