"""Sysctl names and sysctl.d files as sysctl(8) and systemd-sysctl read them, the same for
hostcheck's sysctl check, the probes (sysctl_tuning_probe, hostcheck_probe) and the
sysctl_tuning role's actions and filters. This file is shared: the collection ships it as
module_utils and the hostcheck package as hostcheck._shared (pyproject.toml), so it uses the
standard library only.

A name's separators are dots or slashes: when the first one is a slash, slashes separate and
dots stay (net/ipv4/conf/eth0.100/rp_filter); when it is a dot, dots and slashes swap
(net.ipv4.conf.eth0/100.rp_filter is the same sysctl), as sysctl.d(5) says.
"""

import re

PROC_SYS = "/proc/sys"
# One character of a component: a kernel table (vm, fs, net ...) or an interface name.
_CHAR = "[A-Za-z0-9_@+-]"
# The names the sysctl_tuning role takes: dotted only (one spelling, so a key is never in its
# file twice), the first component a kernel table; a / inside a later one stands for a dot.
DOTTED_NAME_PATTERN = rf"^[a-z0-9_]+(\.{_CHAR}+(/{_CHAR}+)*)+$"
# Either spelling, as sysctl(8) and hostcheck's profiles take them.
NAME_PATTERN = r"^[A-Za-z0-9_@+-]+[./][A-Za-z0-9_@+./-]*[A-Za-z0-9_@+-]$"
_NAME = re.compile(NAME_PATTERN)
_SWAP = str.maketrans("./", "/.")


def dotted(name):
    """A name in its dotted spelling (net/ipv4/tcp_rmem -> net.ipv4.tcp_rmem)."""
    first = re.search(r"[./]", name)
    if first is not None and first.group() == "/":
        return name.translate(_SWAP)
    return name


def proc_path(name):
    """/proc/sys path of a name in either spelling; ValueError for one that is not a sysctl
    name (so no name reads outside /proc/sys)."""
    if not _NAME.match(name):
        raise ValueError(f"not a sysctl name: {name!r}")
    relative = dotted(name).translate(_SWAP)
    if any(part in ("", ".", "..") for part in relative.split("/")):
        raise ValueError(f"not a sysctl name: {name!r}")
    return f"{PROC_SYS}/{relative}"


def sysctl_file_lines(text):
    """(key as written, value) of each assignment of a sysctl.d file, in file order. Blank
    lines, lines starting with # or ; and lines without = are skipped; whitespace around the
    key and the value goes, a leading '-' (ignore errors setting it) is dropped, and the fields
    of a value are joined by one space. None (no file) has none."""
    lines = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        lines.append((key.strip().lstrip("-").strip(), " ".join(value.split())))
    return lines


def sysctl_file_settings(text):
    """(dotted name, value) of each assignment, in file order: what systemd-sysctl and
    `sysctl --system` set (the last line of a name wins)."""
    return [(dotted(key), value) for key, value in sysctl_file_lines(text)]
