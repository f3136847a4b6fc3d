"""What a `hostcheck run` depends on, one digest per part: `hostcheck run ... --host-state`.

The hostcheck role keeps these parts beside a report that passed and runs hostcheck again
only when a part changed. Reading them costs milliseconds, where the checks cost seconds.
A part is the command line, the profile as it resolved, hostcheck's own installation, or
something of the host the checks read; what moves all the time (free memory, swap in use,
mounts of login sessions) is left out.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sysconfig

from hostcheck._shared.mountinfo import parse_mountinfo
from hostcheck._shared.sysctl import proc_path
from hostcheck.checks.base import RunOptions
from hostcheck.config import Profile
from hostcheck.dataloader.training import resolve
from hostcheck.system import System

# The files each part digests (globs), as hostcheck's checks read them.
FILE_PARTS = {
    "/etc/fstab": ["/etc/fstab"],
    "limits": ["/etc/security/limits.conf", "/etc/security/limits.d/*"],
    "PAM": ["/etc/pam.d/*"],
    "systemd manager settings": [
        "/etc/systemd/system.conf",
        *(f"/{top}/systemd/system.conf.d/*" for top in ("etc", "run", "usr/local/lib", "usr/lib")),
    ],
    "sysctl files": [
        "/etc/sysctl.conf",
        *(f"/{top}/sysctl.d/*" for top in ("etc", "run", "usr/local/lib", "usr/lib", "lib")),
    ],
    "users and groups": ["/etc/passwd", "/etc/group"],
    "CPU governors and THP": [
        "/sys/devices/system/cpu/online",
        "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/sys/kernel/mm/transparent_hugepage/defrag",
    ],
}
NVIDIA_FILES = ["/proc/driver/nvidia/version", "/proc/driver/nvidia/gpus/*/information"]
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def texts(system: System, patterns: list[str]) -> dict[str, str | None]:
    """Each file the globs find (a plain path is kept even when missing), by path."""
    found: dict[str, str | None] = {}
    for pattern in patterns:
        if "*" in pattern:
            root = str(system.path("/")).rstrip("/")
            paths = [p[len(root) :] for p in sorted(glob.glob(str(system.path(pattern))))]
        else:
            paths = [pattern]
        for path in paths:
            if not system.path(path).is_dir():
                found[path] = system.read(path)
    return found


def installation(system: System) -> list:
    """Each distribution installed beside hostcheck (this interpreter's site-packages): its
    metadata folder with the size and time of its RECORD, which every install rewrites."""
    paths = sysconfig.get_paths()
    listed = []
    for folder in sorted({str(system.path(paths["purelib"])), str(system.path(paths["platlib"]))}):
        for meta in sorted(glob.glob(f"{folder}/*.dist-info") + glob.glob(f"{folder}/*.egg-info")):
            try:
                info = os.stat(os.path.join(meta, "RECORD"))
                listed.append([os.path.basename(meta), info.st_size, info.st_mtime_ns])
            except OSError:
                listed.append([os.path.basename(meta), None, None])
    return listed


def mounts(system: System) -> list[list[str]]:
    """[mount point, fs type, source, mount options, super options] of each mount."""
    return [
        [m["mount_point"], m["fs_type"], m["source"], ",".join(m["options"]),
         ",".join(m["super_options"])]
        for m in parse_mountinfo(system.read("/proc/self/mountinfo") or "")
    ]  # fmt: skip


def shm(system: System, mounted: list[list[str]]) -> list:
    try:
        info = os.statvfs(system.path("/dev/shm"))
        size = info.f_blocks * info.f_frsize
    except OSError:
        size = None
    return [[m for m in mounted if m[0] == "/dev/shm"][-1:], size]


def swaps(text: str) -> list[list[str]]:
    """/proc/swaps without its Used column."""
    rows = [line.split() for line in text.splitlines()[1:]]
    return [[row[0], row[1], row[2], row[4]] for row in rows if len(row) >= 5]


def sysctl_values(system: System, names: list[str]) -> dict[str, str | None]:
    """The value of each name in the file the sysctl check reads; None for a file that is not
    there."""
    values = {}
    for name in sorted(set(names)):
        try:
            text = system.read(proc_path(name))
        except ValueError:
            text = None
        values[name] = None if text is None else " ".join(text.split())
    return values


def host_state(
    profile: Profile,
    options: RunOptions,
    argv: list[str],
    system: System,
) -> dict[str, str]:
    """The state a run with this profile, these options and this command line depends on,
    one digest per part."""
    checks = profile.values.get("checks") or {}
    sysctls = list((checks.get("sysctl") or {}).get("expect") or {})
    settings, dummy = resolve((checks.get("dataloader") or {}).get("path"), system.env)
    mounted = mounts(system)
    meminfo = system.read("/proc/meminfo") or ""
    parts = {
        "the command line": digest(argv),
        "the profile": digest(profile.values),
        "the options": digest(vars(options)),
        "hostcheck's installation": digest(installation(system)),
        "the boot": digest(system.read(BOOT_ID)),
        "/dev/shm": digest(shm(system, mounted)),
        "block-device mounts": digest(sorted(m for m in mounted if m[2].startswith("/dev/"))),
        "/proc/sys": digest(sysctl_values(system, sysctls)),
        "memory and swap": digest(
            [
                [line for line in meminfo.splitlines() if line.startswith("MemTotal:")],
                swaps(system.read("/proc/swaps") or ""),
            ]
        ),
        "NVIDIA driver and GPUs": digest(
            [texts(system, NVIDIA_FILES), system.path("/run/nvidia-persistenced/socket").exists()]
        ),
        "the DataLoader settings file": digest(system.read(settings)),
    }
    for part, patterns in FILE_PARTS.items():
        parts[part] = digest(texts(system, patterns))
    return parts
