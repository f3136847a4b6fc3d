"""Resource limits as the kernel and PAM write them: the table of /proc/<pid>/limits (proc(5))
and the session stacks of /etc/pam.d (pam.conf(5)), read the same way by the ulimits role's
filters and by hostcheck. This file is shared: the collection ships it as module_utils and the
hostcheck package as hostcheck._shared (pyproject.toml), so it uses the standard library only."""

import re
from collections import namedtuple

# The names /proc/<pid>/limits uses (fs/proc/base.c), for the items the roles and checks set.
PROC_NAMES = {
    "nofile": "Max open files",
    "memlock": "Max locked memory",
    "nproc": "Max processes",
}

_PROC_ROW = re.compile(
    r"^(?P<name>\S.*?)\s+(?P<soft>unlimited|\d+)\s+(?P<hard>unlimited|\d+)(?:\s+(?P<units>\S+))?\s*$"
)


def parse_proc_limits(text, unlimited):
    """{"Max open files": (soft, hard), ...} from the text of /proc/<pid>/limits; "unlimited"
    becomes `unlimited`. Lines that are not rows of the table (a banner before it) are left."""
    rows = {}
    for line in text.splitlines():
        match = _PROC_ROW.match(line)
        if match:
            soft, hard = (
                unlimited if value == "unlimited" else int(value)
                for value in match.group("soft", "hard")
            )
            rows[match.group("name")] = (soft, hard)
    return rows


def proc_items(text, unlimited):
    """{"nofile": {"soft": .., "hard": ..}, ...} for the items of PROC_NAMES found."""
    rows = parse_proc_limits(text, unlimited)
    return {
        item: {"soft": rows[name][0], "hard": rows[name][1]}
        for item, name in PROC_NAMES.items()
        if name in rows
    }


PamModule = namedtuple("PamModule", "service lineno type control module")

# a bracketed control such as [success=1 default=ignore] is one field
_PAM_TOKEN = re.compile(r"\[[^\]]*\]?|\S+")


def pam_modules(service, read, wanted="session", _seen=()):
    """The `wanted`-type modules a PAM service runs, following include, substack and
    Debian's @include. `read(service)` returns /etc/pam.d/<service> text or None."""
    if service in _seen or len(_seen) > 20:
        return []
    text = read(service)
    if text is None:
        return []
    found = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("@include"):
            parts = line.split()
            if len(parts) >= 2:
                found += pam_modules(parts[1], read, wanted, (*_seen, service))
            continue
        tokens = _PAM_TOKEN.findall(line)
        if len(tokens) < 3 or tokens[0].lstrip("-").lower() != wanted:
            continue
        control, module = tokens[1], tokens[2]
        if control in ("include", "substack"):
            found += pam_modules(module, read, wanted, (*_seen, service))
        else:
            found.append(PamModule(service, lineno, tokens[0], control, module))
    return found


def module_name(module):
    """pam_limits.so for /lib/x86_64-linux-gnu/security/pam_limits.so or pam_limits.so."""
    return module.module.rsplit("/", 1)[-1]


RLIM_INFINITY = 2**64 - 1


def parse_systemctl_show(text, unlimited):
    """{"DefaultLimitNOFILE": 524288, ...} from `systemctl show -p DefaultLimit...` output;
    infinity (or RLIM_INFINITY printed as a number) becomes `unlimited`; other values are
    left out."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        value = value.strip()
        if not sep or not key.startswith("DefaultLimit"):
            continue
        if value in ("infinity", str(RLIM_INFINITY)):
            values[key.strip()] = unlimited
        elif value.isdigit():
            values[key.strip()] = int(value)
    return values
