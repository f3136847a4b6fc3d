"""The Debian 12 root file system every sandbox host starts from, built once with mmdebstrap
and cached under .cache/sandbox/rootfs/<key>: rebuilt only when what goes into it changes."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

SUITE = "bookworm"
PACKAGES = (
    "openssh-server",
    "tini",
    "python3",
    "python3-venv",
    "python3-apt",
    "python3-packaging",
    "sudo",
    "mount",
    "util-linux",
    "procps",
    "kmod",
    "iproute2",
    "e2fsprogs",
    "xfsprogs",
    "btrfs-progs",
    "mdadm",
    "gdisk",
    "rsync",
    "ca-certificates",
    "pciutils",
    "less",
)
# Manual pages, documentation and translations are not needed to test roles.
DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
)
APT_OPTIONS = ('Acquire::Check-Valid-Until "false"',)
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
# Run in the new root after the packages are in: no host keys shared between hosts, no
# services started by package scripts, root reachable only with a key.
CUSTOMIZE = (
    "rm -f $1/etc/ssh/ssh_host_*",
    "echo 'PermitRootLogin prohibit-password' > $1/etc/ssh/sshd_config.d/00-root.conf",
    "printf '# sandbox host: nothing mounted at boot\\n' > $1/etc/fstab",
)


def sources_text() -> str:
    if SOURCES.exists():
        return SOURCES.read_text()
    legacy = Path("/etc/apt/sources.list")
    return legacy.read_text() if legacy.exists() else ""


def cache_key() -> str:
    recipe = {
        "suite": SUITE,
        "packages": sorted(PACKAGES),
        "dpkg": DPKG_OPTIONS,
        "apt": APT_OPTIONS,
        "customize": CUSTOMIZE,
        "sources": sources_text(),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def ensure_rootfs(cache: Path, log=print) -> Path:
    """The cached root for the current recipe, built if missing; older builds are removed.
    Fleets started in parallel (pytest workers) wait for one build instead of racing."""
    base = cache / "rootfs"
    target = base / cache_key()
    if (target / "etc" / "debian_version").exists():
        return target
    base.mkdir(parents=True, exist_ok=True)
    with open(base.parent / ".rootfs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "etc" / "debian_version").exists():
            return target
        return _build(base, target, log)


def _build(base: Path, target: Path, log) -> Path:
    key = target.name
    if shutil.which("mmdebstrap") is None:
        raise RuntimeError("mmdebstrap is not installed (apt-get install mmdebstrap)")
    for stale in base.iterdir():
        shutil.rmtree(stale, ignore_errors=True)
    building = base / f".building-{key}"
    sources = SOURCES if SOURCES.exists() else Path("/etc/apt/sources.list")
    argv = [
        "mmdebstrap",
        "--variant=apt",
        "--mode=root",
        "--format=directory",
        f"--include={','.join(PACKAGES)}",
        *(f"--aptopt={opt}" for opt in APT_OPTIONS),
        *(f"--dpkgopt={opt}" for opt in DPKG_OPTIONS),
        *(f"--customize-hook={hook}" for hook in CUSTOMIZE),
        SUITE,
        str(building),
        str(sources),
    ]
    start = time.monotonic()
    log(f"building the sandbox root file system with mmdebstrap ({len(PACKAGES)} packages)")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"mmdebstrap failed ({done.returncode}):\n{tail}")
    building.rename(target)
    log(f"root file system built in {time.monotonic() - start:.0f} s (cold cache): {target}")
    return target
