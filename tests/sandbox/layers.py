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
key, so modules and checkouts converging the same thing wait for one converge. Layers no run
has used for KEEP_UNUSED_DAYS and no host runs on are removed when another is made."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
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
        self._remove_stale()
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
        (building / DONE).write_text(json.dumps({"hosts": sorted(uppers), "made": time.time()}))
        shutil.rmtree(folder, ignore_errors=True)
        building.rename(folder)
        _used_stamp(folder).touch()
        return {name: folder / name for name in uppers}

    def _remove_stale(self) -> None:
        now = time.time()
        for folder in self.base.glob("[!.]*"):
            stamp = _used_stamp(folder)
            used = stamp.stat().st_mtime if stamp.exists() else 0.0
            if now - used > KEEP_UNUSED_DAYS * 86400 and not rootfs.in_use(folder):
                shutil.rmtree(folder, ignore_errors=True)
                stamp.unlink(missing_ok=True)


def _used_stamp(folder: Path) -> Path:
    return folder.with_name(f".used-{folder.name}")
