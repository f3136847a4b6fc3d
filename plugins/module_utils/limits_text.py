"""Resource limits as the kernel, PAM and systemd write them: the table of /proc/<pid>/limits
(proc(5)), limits.conf and its values (limits.conf(5), as pam_limits reads them), the session
stacks of /etc/pam.d (pam.conf(5)) and `systemctl show`, read the same way by the ulimits role's
actions and by hostcheck. This file is shared: the collection ships it as module_utils and the
hostcheck package as hostcheck._shared (pyproject.toml), so it uses the standard library only."""

import re
from collections import namedtuple

# The items the ulimits role sets and hostcheck's ulimits check reads, and the two halves of each.
ITEMS = ("nofile", "memlock", "nproc")
KINDS = ("soft", "hard")

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

# --- limits.conf -------------------------------------------------------------------------------

LimitsEntry = namedtuple("LimitsEntry", "lineno domain type item value")
_BLANKS = re.compile(r"[ \t]+")


def limits_conf_entries(text):
    """The lines of a limits.conf file pam_limits acts on, split as it splits them (Linux-PAM
    1.5): a line ends at a newline, '#' starts a comment, domain, type and item are separated
    by spaces or tabs and the value is the rest of the line without the blanks around it. The
    fields are as written; pam_limits lowercases type, item and value before acting on them.
    A two-field line `<domain> -` has item and value None; other lines with fewer than four
    fields are left out (pam_limits skips them)."""
    found = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.lstrip(" \t\n\v\f\r").split("#", 1)[0]
        fields = _BLANKS.split(line.strip(" \t"), maxsplit=3)
        if len(fields) == 4:
            found.append(LimitsEntry(lineno, *fields))
        elif len(fields) == 2 and fields[1].startswith("-"):
            found.append(LimitsEntry(lineno, fields[0], fields[1], None, None))
    return found


# limits.conf items whose values are KiB (pam_limits multiplies them by 1024).
KIB_ITEMS = frozenset({"fsize", "data", "stack", "core", "rss", "memlock", "as"})
RLIMIT_ITEMS = frozenset(
    {
        "cpu", "fsize", "data", "stack", "core", "rss", "nproc", "nofile", "memlock", "as",
        "locks", "sigpending", "msgqueue", "nice", "rtprio", "rttime",
    }
)  # fmt: skip
# The values that mean no limit, for every item but nice (pam_limits' process_limit).
UNLIMITED_VALUES = ("-1", "-", "unlimited", "infinity")
_NUMBER = re.compile(r"^[ \t\n\v\f\r]*\+?(\d+)")


def conf_value_rlimit(item, text, unlimited, nr_open=None):
    """The rlimit a (lowercased) limits.conf value sets, in the kernel's unit: bytes for the
    KiB items such as memlock, seconds for cpu. -1, -, unlimited and infinity are `unlimited`
    (nofile's is fs.nr_open when `nr_open` is given); a number is read as strtoul reads it
    (leading blanks and '+' allowed, anything after the digits ignored) and one the kernel cannot
    hold is `unlimited`. None for a value pam_limits rejects, and for a negative number."""
    if item not in RLIMIT_ITEMS:
        return None
    if item != "nice" and text in UNLIMITED_VALUES:
        if item == "nofile" and nr_open is not None:
            return nr_open
        return unlimited
    match = _NUMBER.match(text)
    if not match:
        return None
    value = int(match.group(1))
    if value >= RLIM_INFINITY:
        return unlimited
    if item in KIB_ITEMS:
        return unlimited if value >= RLIM_INFINITY // 1024 else value * 1024
    if item == "cpu":
        return unlimited if value >= RLIM_INFINITY // 60 else value * 60
    return value


# --- systemd -----------------------------------------------------------------------------------

SYSTEMD_NAMES = {"nofile": "NOFILE", "memlock": "MEMLOCK", "nproc": "NPROC"}


def systemd_property(item, kind):
    """The org.freedesktop.systemd1.Manager property: DefaultLimitNOFILE is the hard
    limit, DefaultLimitNOFILESoft the soft one."""
    return "DefaultLimit" + SYSTEMD_NAMES[item] + ("Soft" if kind == "soft" else "")


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
