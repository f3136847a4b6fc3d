"""The root file system of each OS kind (tests/sandbox/oskinds.py), built once with mmdebstrap
and cached in the machine-wide cache (tests/paths.py) under sandbox/rootfs/<kind>-<key>: rebuilt
only when what goes into it changes. Every root boots systemd; look-alikes are then given their
distribution's identity. Checkouts with different recipes share the folder: a build of another
recipe is removed only when no host runs on it and no run has used it for KEEP_UNUSED_DAYS."""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import inspect
import json
import platform
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from tests.sandbox import sources
from tests.sandbox.oskinds import KINDS, OsKind

PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "libpam-systemd",
    "openssh-server",
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
    # compiles go through it where a compiler is (tests/sandbox/fleet.py), sharing one cache
    "ccache",
)
# Manual pages, documentation and translations are not needed to test roles.
DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
)
APT_OPTIONS = ('Acquire::Check-Valid-Until "false"',)
# Timers that would take the package manager's lock or the disks in the middle of a test run
# at a random moment; a console getty nobody logs in on. And what costs inotify instances,
# which all hosts share with this machine's root (fs.inotify.max_user_instances, 128 here):
# the password agents' path units and the per-user service managers of SSH logins.
MASKED_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "mdcheck_start.timer",
    "mdcheck_continue.timer",
    "mdmonitor-oneshot.timer",
    "console-getty.service",
    "systemd-ask-password-wall.path",
    "systemd-ask-password-console.path",
    "user@.service",
)
CCACHE_LOCKING_SCRIPT = r"""#!/bin/sh
name=${0##*/}
if [ "$name" = ccache ] || [ -z "$CCACHE_DIR" ]; then exec /usr/bin/ccache.real "$@"; fi
compiler=/usr/bin/$name
key=$(printf '%s\n' "$(readlink -f "$compiler")" "$@" | sed 's#/tmp/[^/ ]*##g' | sha256sum)
mkdir -p "$CCACHE_DIR/locks"
exec flock "$CCACHE_DIR/locks/${key%% *}" /usr/bin/ccache.real "$compiler" "$@"
"""
# Run in the new root after the packages are in: no host keys shared between hosts, root
# reachable only with a key, nothing mounted at boot, no timers firing during tests.
CUSTOMIZE = (
    "rm -f $1/etc/ssh/ssh_host_*",
    "echo 'PermitRootLogin prohibit-password' > $1/etc/ssh/sshd_config.d/00-root.conf",
    "printf '# sandbox host: nothing mounted at boot\\n' > $1/etc/fstab",
    "rm -f $1/etc/hostname $1/etc/machine-id && touch $1/etc/machine-id",
    # the hosts get this machine's sources, bound read-only at run time
    "rm -f $1/etc/apt/sources.list.d/0000*",
    f"systemctl --root=$1 mask {' '.join(MASKED_UNITS)}",
    "systemctl --root=$1 set-default multi-user.target",
    # ccache behind a lock per compile (its arguments without pip's temporary folders, and the
    # compiler): the same build started on several hosts at once (site.yml on every OS kind)
    # compiles each file once, the other hosts wait for it and take it from the shared cache
    "dpkg-divert --root=$1 --rename --divert /usr/bin/ccache.real --add /usr/bin/ccache",
    f"printf '%s\\n' {shlex.quote(CCACHE_LOCKING_SCRIPT)} > $1/usr/bin/ccache",
    "chmod 755 $1/usr/bin/ccache",
)


def _lookalike(kind: OsKind):
    return importlib.import_module(f"tests.sandbox.lookalike_{kind.lookalike}")


def packages(kind: OsKind) -> tuple[str, ...]:
    extra = tuple(_lookalike(kind).ROOT_PACKAGES) if kind.lookalike else ()
    return tuple(dict.fromkeys(PACKAGES + extra))


def cache_key(kind: OsKind) -> str:
    recipe = {
        "kind": kind.name,
        "suite": kind.suite,
        "packages": sorted(packages(kind)),
        "dpkg": DPKG_OPTIONS,
        "apt": APT_OPTIONS,
        "customize": CUSTOMIZE,
        "sources": sources.debian_sources_text(kind.suite),
    }
    if kind.lookalike:
        # stand-in packages are built for the running kernel (hosts share this machine's)
        recipe["lookalike"] = inspect.getsource(_lookalike(kind))
        recipe["kernel"] = platform.release()
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


KEEP_UNUSED_DAYS = 7


def ensure_rootfs(cache: Path, kind: OsKind = KINDS["debian12"], log=print) -> Path:
    """The cached root of this kind for the current recipe, built if missing. Fleets started
    in parallel (pytest workers, other checkouts) wait for one build."""
    base = cache / "rootfs"
    target = base / f"{kind.name}-{cache_key(kind)}"
    done_marker = target / "etc" / "os-release"
    base.mkdir(parents=True, exist_ok=True)
    _used_stamp(target).touch()
    if done_marker.exists():
        return target
    with open(base.parent / f".rootfs-{kind.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done_marker.exists():
            return target
        return _build(base, target, kind, log)


def _used_stamp(root: Path) -> Path:
    return root.with_name(f".used-{root.name}")


def _stale(root: Path, now: float) -> bool:
    """Another recipe's build that no run has asked for in KEEP_UNUSED_DAYS and no host runs on."""
    stamp = _used_stamp(root)
    used = stamp.stat().st_mtime if stamp.exists() else 0.0
    return now - used > KEEP_UNUSED_DAYS * 86400 and not in_use(root)


def lower_layer(folder: Path) -> re.Pattern[bytes]:
    """Matches a mountinfo line of an overlay that has this folder among its lower layers."""
    return re.compile(rb"lowerdir=(?:[^,:\s]*:)*" + re.escape(str(folder).encode()) + rb"[,:\s]")


def in_use(folder: Path) -> bool:
    """Whether a running host has this folder among its overlay's lower layers (a root file
    system, or a converged layer above one: tests/sandbox/layers.py)."""
    needle = lower_layer(folder)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.search((entry / "mountinfo").read_bytes()):
                    return True
            except OSError:
                continue
    return False


def _build(base: Path, target: Path, kind: OsKind, log) -> Path:
    if shutil.which("mmdebstrap") is None:
        raise RuntimeError("mmdebstrap is not installed (apt-get install mmdebstrap)")
    now = time.time()
    for other in base.glob(f"{kind.name}-*"):
        if other != target and _stale(other, now):
            shutil.rmtree(other, ignore_errors=True)
            _used_stamp(other).unlink(missing_ok=True)
    building = base / f".building-{target.name}"
    shutil.rmtree(building, ignore_errors=True)
    wanted = packages(kind)
    # In a mount and PID namespace of its own that dies with this process: a build killed
    # half-way leaves no mounts behind and no orphan writing into the next build's folder.
    argv = [
        "setpriv",
        "--pdeathsig",
        "KILL",
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "mmdebstrap",
        "--variant=apt",
        "--mode=root",
        "--format=directory",
        f"--include={','.join(wanted)}",
        *(f"--aptopt={opt}" for opt in APT_OPTIONS),
        *(f"--dpkgopt={opt}" for opt in DPKG_OPTIONS),
        *(f"--customize-hook={hook}" for hook in CUSTOMIZE),
        kind.suite,
        str(building),
        str(sources.debian_sources_file(kind.suite, base.parent)),
    ]
    start = time.monotonic()
    log(f"building the {kind.title} root file system with mmdebstrap ({len(wanted)} packages)")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"mmdebstrap failed for {kind.name} ({done.returncode}):\n{tail}")
    try:
        if kind.lookalike:
            version = int(kind.version) if kind.lookalike == "rocky" else kind.version
            _lookalike(kind).customize(building, version, platform.release())
    except Exception:
        shutil.rmtree(building, ignore_errors=True)
        raise
    building.rename(target)
    log(f"{kind.name} root built in {time.monotonic() - start:.0f} s (cold cache): {target}")
    return target
