"""The mount table from /proc/<pid>/mountinfo (see proc(5))."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from hostcheck.system import System

_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(field: str) -> str:
    """Mount fields escape space, tab, newline and backslash as octal (\\040)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


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
    """Parse mountinfo lines; malformed lines raise ValueError naming the line."""
    mounts = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            mount_id, parent_id = int(fields[0]), int(fields[1])
            major_text, minor_text = fields[2].split(":")
            mounts.append(
                Mount(
                    mount_id=mount_id,
                    parent_id=parent_id,
                    major=int(major_text),
                    minor=int(minor_text),
                    root=unescape(fields[3]),
                    mount_point=unescape(fields[4]),
                    options=tuple(fields[5].split(",")),
                    fs_type=unescape(fields[separator + 1]),
                    source=unescape(fields[separator + 2]),
                    super_options=tuple(o for o in fields[separator + 3].split(",") if o)
                    if len(fields) > separator + 3
                    else (),
                )
            )
        except (ValueError, IndexError):
            raise ValueError(f"mountinfo line {number} is malformed: {line!r}") from None
    return mounts


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
