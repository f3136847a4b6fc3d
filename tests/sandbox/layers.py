"""Converged hosts kept as overlay layers in the machine-wide cache (tests/paths.py), under
sandbox/layers/<key>/<host>: what a playbook left on each host's root, between the host's own
changes and its OS kind's root file system. A module whose subject is not the first converge
boots its hosts from them instead of converging again.

The key is what the converge is made of: the content of every tracked file the playbook, the
roles and the hosts read (INPUTS, from the work tree, so an uncommitted change counts), the
run's playbook, variables, tags and limit, the fleet's options, the hosts' OS kinds and their
root file systems' keys, and the Ansible that runs it. Anything else changed builds anew.
What a host must not share with another (its name, keys, addresses, journal, machine id) is
left out of the layer (HOST_OWN): the fleet writes a host's own at every boot.

A layer is made by moving a stopped host's changes into the cache (no copy), under a lock per
key, so modules and checkouts converging the same thing wait for one converge. When another is
made, layers no run has used for KEEP_UNUSED_DAYS are removed, and then the least recently used
until all of them, the new one included, take at most KEEP_AT_MOST_BYTES; a layer a host runs on
is never removed."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.sandbox import rootfs

# Tracked paths whose content a converge depends on (shell patterns, `*` crossing `/`).
INPUTS = (
    "site.yml",
    "playbooks/*",
    "roles/*",
    "plugins/*",
    "meta/*",
    "galaxy.yml",
    "hostcheck/*",
    "pyproject.toml",
    "ansible.cfg",
    "inventory/sandbox_group_vars/*",
    "tests/integration/playbooks/*",
    "tests/sandbox/*",
)
# Paths under a host's root that are the host's own, never a layer's.
HOST_OWN = (
    "etc/hostname",
    "etc/hosts",
    "etc/machine-id",
    "etc/environment",
    "etc/ssh/sshd_config.d/10-sandbox.conf",
    "etc/tmpfiles.d/sandbox-disks.conf",
    "root/.ssh",
    "run",
    "tmp",
    "var/tmp",
    "var/log/journal",
    "var/lib/systemd/random-seed",
)
HOST_KEYS = "etc/ssh/ssh_host_*"
KEEP_UNUSED_DAYS = 7
# A full run after a change to the roles keeps about 3.4 GB: room for that and two more.
KEEP_AT_MOST_BYTES = 12 * 2**30
DONE = ".complete"


def input_digest(checkout: Path) -> str:
    """sha256 over the path and content of every tracked file matching INPUTS."""
    listed = subprocess.run(
        ["git", "-C", str(checkout), "ls-files", "-z", "--", *INPUTS],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    digest = hashlib.sha256()
    for name in sorted(p for p in listed if p):
        path = checkout / name.decode()
        digest.update(name + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"(missing)")
        digest.update(b"\0")
    return digest.hexdigest()


def ansible_version() -> str:
    from ansible.release import __version__

    return __version__


def layer_key(checkout: Path, recipe: dict) -> str:
    """The key of a converge: INPUTS' content and the recipe (playbook, variables, tags,
    limit, fleet options, OS kinds), with each OS kind's root file system key."""
    kinds = sorted(set(recipe.get("os", [])))
    whole = {
        "inputs": input_digest(checkout),
        "recipe": recipe,
        "roots": {name: rootfs.cache_key(rootfs.KINDS[name]) for name in kinds},
        "ansible": ansible_version(),
    }
    return hashlib.sha256(json.dumps(whole, sort_keys=True).encode()).hexdigest()[:16]


class Layers:
    def __init__(self, cache: Path) -> None:
        self.base = cache / "layers"

    def folder(self, key: str) -> Path:
        return self.base / key

    @contextlib.contextmanager
    def locked(self, key: str) -> Iterator[None]:
        self.base.mkdir(parents=True, exist_ok=True)
        with open(self.base / f".{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def find(self, key: str, names: list[str]) -> dict[str, Path] | None:
        """The layer of each host named, when a complete set was kept for this key."""
        folder = self.folder(key)
        if not (folder / DONE).exists():
            return None
        found = {name: folder / name for name in names}
        if not all(path.is_dir() for path in found.values()):
            return None
        _used_stamp(folder).touch()
        return found

    def keep(self, key: str, uppers: dict[str, Path]) -> dict[str, Path]:
        """Move each stopped host's changes (its overlay's upper folder) into a layer for key,
        less HOST_OWN; the hosts' folders are left without them (bring the fleet down)."""
        folder = self.folder(key)
        building = self.base / f".building-{key}"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        for name, upper in uppers.items():
            target = building / name
            upper.rename(target)
            for own in HOST_OWN:
                path = target / own
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
            for key_file in target.glob(HOST_KEYS):
                key_file.unlink()
        size = disk_bytes(building)
        record = {"hosts": sorted(uppers), "made": time.time(), "bytes": size}
        (building / DONE).write_text(json.dumps(record))
        shutil.rmtree(folder, ignore_errors=True)
        self._make_room(size, keep=key)
        building.rename(folder)
        _used_stamp(folder).touch()
        return {name: folder / name for name in uppers}

    def _make_room(self, adding: int, keep: str) -> None:
        """Remove the layers unused for KEEP_UNUSED_DAYS, then the least recently used, until
        what stays and `adding` fit in KEEP_AT_MOST_BYTES. A layer a host runs on stays."""
        now = time.time()
        kept = []
        for folder in self.base.glob("[!.]*"):
            if folder.name == keep:
                continue
            stamp = _used_stamp(folder)
            used = stamp.stat().st_mtime if stamp.exists() else 0.0
            kept.append((used, folder, _recorded_bytes(folder)))
        total = adding + sum(size for _, _, size in kept)
        for used, folder, size in sorted(kept, key=lambda entry: entry[0]):
            stale = now - used > KEEP_UNUSED_DAYS * 86400
            if not (stale or total > KEEP_AT_MOST_BYTES) or rootfs.in_use(folder):
                continue
            total -= size
            shutil.rmtree(folder, ignore_errors=True)
            _used_stamp(folder).unlink(missing_ok=True)


def disk_bytes(folder: Path) -> int:
    """The disk space a tree takes (allocated blocks; a file linked twice counted once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            info = os.lstat(os.path.join(root, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def _recorded_bytes(folder: Path) -> int:
    """A layer's size as recorded when it was made; measured for a layer made before sizes
    were recorded, or left unfinished."""
    try:
        return int(json.loads((folder / DONE).read_text())["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return disk_bytes(folder)


def _used_stamp(folder: Path) -> Path:
    return folder.with_name(f".used-{folder.name}")
