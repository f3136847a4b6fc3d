"""The mount table from /proc/<pid>/mountinfo (proc(5)), read the same way by the roles'
modules and by hostcheck. This file is shared: the collection ships it as module_utils and the
hostcheck package as hostcheck._shared (pyproject.toml), so it uses the standard library only."""

import re

_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(field):
    """Mount fields escape space, tab, newline and backslash as octal (\\040)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text):
    """One dict a mount (mount_id, parent_id, major, minor, root, mount_point, options,
    fs_type, source, super_options); a malformed line raises ValueError naming it."""
    mounts = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            major, minor = fields[2].split(":")
            mounts.append(
                {
                    "mount_id": int(fields[0]),
                    "parent_id": int(fields[1]),
                    "major": int(major),
                    "minor": int(minor),
                    "root": unescape(fields[3]),
                    "mount_point": unescape(fields[4]),
                    "options": tuple(fields[5].split(",")),
                    "fs_type": unescape(fields[separator + 1]),
                    "source": unescape(fields[separator + 2]),
                    "super_options": tuple(o for o in fields[separator + 3].split(",") if o)
                    if len(fields) > separator + 3
                    else (),
                }
            )
        except (ValueError, IndexError):
            raise ValueError(f"mountinfo line {number} is malformed: {line!r}") from None
    return mounts
