"""The mount table from /proc/<pid>/mountinfo (see proc(5)), as hostcheck's checks use it."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from hostcheck._shared import mountinfo as shared_mountinfo
from hostcheck.system import System


def escape(text: str) -> str:
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in text)


@dataclass(frozen=True)
class Mount:
    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: tuple[str, ...]  # per-mount options (rw, noatime, nosuid ...)
    fs_type: str
    source: str
    super_options: tuple[str, ...]  # file system options (size=, mode= ...)

    @property
    def all_options(self) -> tuple[str, ...]:
        return self.options + tuple(o for o in self.super_options if o not in self.options)

    def option(self, name: str) -> str | None:
        """Value of `name=value` among the options, '' for a flag, None when absent."""
        for opt in self.all_options:
            key, sep, value = opt.partition("=")
            if key == name:
                return value if sep else ""
        return None


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse mountinfo lines (plugins/module_utils/mountinfo.py, shared with the roles);
    malformed lines raise ValueError naming the line."""
    return [Mount(**fields) for fields in shared_mountinfo.parse_mountinfo(text)]


def mount_for(mounts: list[Mount], path: str) -> Mount | None:
    """The mount that holds `path` (absolute, resolved): the longest matching mount point,
    and of several mounts on the same point, the last one (it hides the others)."""
    path = posixpath.normpath(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            best = mount
    return best


def read_mounts(system: System) -> list[Mount]:
    return parse_mountinfo(system.read("/proc/self/mountinfo") or "")
