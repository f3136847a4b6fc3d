"""Resource limits as text: /proc/<pid>/limits, limits.conf (pam_limits), PAM stacks, systemd.

Pure functions on text, so they can be tested without a host. Values are ints, or
`units.UNLIMITED` (math.inf) for RLIM_INFINITY.

limits.conf semantics follow pam_limits(8) / limits.conf(5) (Linux-PAM 1.5):
- /etc/security/limits.conf is read first, then /etc/security/limits.d/*.conf in "C"
  locale order of their names; the effect is as if all were concatenated.
- A later line overrides an earlier one of the same or a weaker kind; a user entry (the
  user name, or a uid range `min:max`, `:uid`, `min:`) beats a group entry (`@group`, gid
  range `@min:max`, `@:gid`), which beats the wildcard `*`. `%` domains are for
  maxlogins only.
- Group and wildcard entries are not applied to root (limits.conf(5) NOTE; seen on
  Debian 12: `* - nofile` and `@root - nproc` do not change a `runuser -l root` session).
- A two-field line `<domain> -` that matches the user makes pam_limits set no limits at all.
- Type `-` sets soft and hard; as in pam_limits, when the soft half is held by a stronger
  entry the hard half of that line is not applied either.
- Values: -1, -, unlimited, infinity mean no limit (nofile: /proc/sys/fs/nr_open);
  memlock and the other size items are in KiB.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Callable, Union

from hostcheck._shared import limits_text as shared_limits
from hostcheck._shared.limits_text import (
    SYSTEMD_NAMES,
    PamModule,
)
from hostcheck.units import UNLIMITED, format_limit

Limit = Union[int, float]  # an int, or UNLIMITED

PROC_UNITS = {"nofile": "files", "memlock": "bytes", "nproc": "processes"}

# Strength of a limits.conf entry, as pam_limits ranks them (lower wins).
USER, GROUP, ALLGROUP, ALL, DEFAULT = 0, 1, 2, 3, 4


def limit_text(value: Limit) -> str:
    return format_limit(value)


def limit_raw(value: Limit) -> int | str:
    """JSON-able: the int, or "unlimited"."""
    return "unlimited" if value == UNLIMITED else int(value)


# --- /proc/<pid>/limits ------------------------------------------------------------------


def parse_proc_limits(text: str) -> dict[str, tuple[Limit, Limit]]:
    """{"Max open files": (soft, hard), ...} from the text of /proc/<pid>/limits."""
    return shared_limits.parse_proc_limits(text, UNLIMITED)


def proc_items(text: str) -> dict[str, dict[str, Limit]]:
    """{"nofile": {"soft": .., "hard": ..}, ...} for the items found in /proc/<pid>/limits."""
    return shared_limits.proc_items(text, UNLIMITED)


def format_proc_limits(rows: Sequence[tuple[str, Limit, Limit, str]]) -> str:
    """The kernel's layout of /proc/<pid>/limits for (name, soft, hard, units) rows."""
    lines = [f"{'Limit':<25} {'Soft Limit':<20} {'Hard Limit':<20} {'Units':<10}"]
    for name, soft, hard, units in rows:
        line = f"{name:<25} {limit_text(soft):<20} {limit_text(hard):<20} "
        lines.append(line + (f"{units:<10}" if units else ""))
    return "\n".join(lines) + "\n"


# --- limits.conf -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LimitsLine:
    """One meaningful line of a limits.conf file. `item` is None for `<domain> -` lines."""

    path: str
    lineno: int
    domain: str
    type: str
    item: str | None = None
    value: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.lineno}"

    @property
    def disables(self) -> bool:
        return self.item is None


def parse_limits_conf(text: str, path: str = "limits.conf") -> list[LimitsLine]:
    """The lines pam_limits would act on, split and lowercased as pam_limits does. Lines with
    three fields, or two fields other than `<domain> -`, are skipped (pam_limits logs them)."""
    return [
        LimitsLine(
            path,
            entry.lineno,
            entry.domain,
            entry.type.lower(),
            entry.item and entry.item.lower(),
            entry.value and entry.value.lower(),
        )
        for entry in shared_limits.limits_conf_entries(text)
    ]


def parse_conf_value(item: str, text: str, nr_open: int | None = None) -> Limit | None:
    """The rlimit a limits.conf value sets, in the kernel's unit (bytes for memlock);
    None for a value pam_limits rejects."""
    return shared_limits.conf_value_rlimit(item, text, UNLIMITED, nr_open)


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: int
    gid: int  # primary group
    groups: frozenset[str] = frozenset()  # names of all groups, primary included
    gids: frozenset[int] = frozenset()  # ids of all groups, primary included


def _range(domain: str) -> tuple[str, int | None, int | None] | None:
    """("none"|"one"|"min"|"mm", min, max) for uid/gid ranges; None when malformed."""
    if ":" not in domain:
        return ("none", None, None)
    body = domain[1:] if domain[:1] in ("@", "%") else domain
    low, _, high = body.partition(":")
    if low and not low.isdigit():
        return None
    if high and not high.isdigit():
        return None
    if not low:
        return ("one", int(high), int(high)) if high else None
    if not high:
        return ("min", int(low), None)
    return ("mm", int(low), int(high))


def _in_range(value: int, kind: str, low: int | None, high: int | None) -> bool:
    if kind == "one":
        return value == high
    if kind == "min":
        return low is not None and value >= low
    return low is not None and high is not None and low <= value <= high


def entry_source(domain: str, user: UserInfo) -> int | None:
    """How strongly a domain applies to the user (USER, GROUP, DEFAULT, ...), or None."""
    bounds = _range(domain)
    if bounds is None:
        return None
    kind, low, high = bounds
    if domain == user.name:
        return USER
    if domain.startswith("@"):
        if kind == "none":
            applies = domain[1:] in user.groups
        elif kind == "one":
            applies = high in user.gids
        else:
            applies = _in_range(user.gid, kind, low, high)
        return GROUP if applies else None
    if domain.startswith("%"):
        if kind == "none":
            return ALL if domain == "%" else (ALLGROUP if domain[1:] in user.groups else None)
        return ALLGROUP if kind == "one" and high in user.gids else None
    if kind == "none":
        return DEFAULT if domain == "*" else None
    return USER if _in_range(user.uid, kind, low, high) else None


def _applies_to(source: int | None, user: UserInfo) -> bool:
    if source is None:
        return False
    # Group and wildcard entries are not applied to root (limits.conf(5)).
    return not (user.uid == 0 and source in (GROUP, ALLGROUP, ALL, DEFAULT))


@dataclass(frozen=True)
class Setting:
    value: Limit
    line: LimitsLine
    source: int


@dataclass
class Resolution:
    """What limits.conf and limits.d ask for one user: (item, kind) -> Setting."""

    settings: dict[tuple[str, str], Setting] = field(default_factory=dict)
    disabled_by: LimitsLine | None = None  # a `<domain> -` line: pam_limits sets nothing

    def get(self, item: str, kind: str) -> Setting | None:
        return self.settings.get((item, kind))


def resolve_limits(
    lines: Iterable[LimitsLine], user: UserInfo, nr_open: int | None = None
) -> Resolution:
    """The entries pam_limits applies for `user`, from lines in reading order."""
    result = Resolution()
    for line in lines:
        source = entry_source(line.domain, user)
        if line.disables:
            if _applies_to(source, user) and source in (USER, GROUP):
                return Resolution(disabled_by=line)
            continue
        if not _applies_to(source, user) or source in (ALL, ALLGROUP):
            continue
        assert line.item is not None and line.value is not None and source is not None
        value = parse_conf_value(line.item, line.value, nr_open)
        if value is None or line.type not in ("soft", "hard", "-"):
            continue
        kinds = ("soft", "hard") if line.type == "-" else (line.type,)
        for kind in kinds:
            held = result.settings.get((line.item, kind))
            if held is not None and held.source < source:
                break  # pam_limits returns here: the rest of the line is not applied
            result.settings[(line.item, kind)] = Setting(value, line, source)
    return result


def limits_conf_files(glob: Callable[[str], list[str]]) -> list[str]:
    """The files pam_limits reads, in order: limits.conf, then limits.d/*.conf by name."""
    dropins = sorted(glob("/etc/security/limits.d/*.conf"), key=lambda p: p.rsplit("/", 1)[-1])
    return ["/etc/security/limits.conf", *dropins]


# --- /etc/passwd and /etc/group --------------------------------------------------------------


def lookup_user(name: str, passwd: str, group: str) -> UserInfo | None:
    """A user's uid, primary gid and groups from the text of /etc/passwd and /etc/group."""
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[0] == name and fields[2].isdigit() and fields[3].isdigit():
            uid, gid = int(fields[2]), int(fields[3])
            break
    else:
        return None
    names, gids = set(), {gid}
    for line in group.splitlines():
        fields = line.split(":")
        if len(fields) < 4 or not fields[2].isdigit():
            continue
        members = [m for m in fields[3].split(",") if m]
        if int(fields[2]) == gid or name in members:
            names.add(fields[0])
            gids.add(int(fields[2]))
    return UserInfo(name, uid, gid, frozenset(names), frozenset(gids))


# --- PAM stacks --------------------------------------------------------------------------------


def uses_pam_limits(modules: Iterable[PamModule]) -> PamModule | None:
    for module in modules:
        if shared_limits.module_name(module) == "pam_limits.so":
            return module
    return None


# --- systemd ------------------------------------------------------------------------------------


def parse_systemctl_show(text: str) -> dict[str, Limit]:
    """{"DefaultLimitNOFILE": 524288, ...} from `systemctl show -p ...` output."""
    return shared_limits.parse_systemctl_show(text, UNLIMITED)


_SYSTEMD_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5,
                   "E": 1024**6, "B": 1}  # fmt: skip


def parse_systemd_limit(item: str, text: str) -> tuple[Limit, Limit] | None:
    """(soft, hard) from a system.conf value such as 1024:524288, 8M or infinity."""
    parts = text.strip().split(":")
    if len(parts) > 2 or not all(p.strip() for p in parts):
        return None
    values = []
    for part in parts:
        part = part.strip()
        if part == "infinity":
            values.append(UNLIMITED)
            continue
        match = re.fullmatch(r"(\d+)\s*([KMGTPEB]?)", part) if item == "memlock" else None
        if match:
            values.append(int(match.group(1)) * _SYSTEMD_SUFFIX[match.group(2)])
        elif part.isdigit():
            values.append(int(part))
        else:
            return None
    return (values[0], values[-1])


@dataclass(frozen=True)
class SystemdSetting:
    value: tuple[Limit, Limit] | None  # None: the line resets to the built-in default
    path: str
    lineno: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.lineno}"


def parse_system_conf(text: str, path: str) -> dict[str, SystemdSetting]:
    """DefaultLimitXXX= settings of the [Manager] section of one system.conf file."""
    found: dict[str, SystemdSetting] = {}
    section = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if section != "Manager" or not sep or not key.startswith("DefaultLimit"):
            continue
        item = next((i for i, n in SYSTEMD_NAMES.items() if key == f"DefaultLimit{n}"), None)
        if item is None:
            continue
        value = value.strip()
        found[item] = SystemdSetting(
            parse_systemd_limit(item, value) if value else None, path, lineno
        )
    return found


SYSTEM_CONF_DIRS = ("/etc", "/run", "/usr/local/lib", "/usr/lib")


def system_conf_files(exists: Callable[[str], bool], glob: Callable[[str], list[str]]) -> list[str]:
    """system.conf then its drop-ins, in the order systemd applies them: the first main file
    found, then *.conf from every system.conf.d by name, /etc shadowing /run and /usr."""
    files = []
    for base in SYSTEM_CONF_DIRS:
        path = f"{base}/systemd/system.conf"
        if exists(path):
            files.append(path)
            break
    dropins: dict[str, str] = {}
    for base in reversed(SYSTEM_CONF_DIRS):
        for path in glob(f"{base}/systemd/system.conf.d/*.conf"):
            dropins[path.rsplit("/", 1)[-1]] = path
    return files + [dropins[name] for name in sorted(dropins)]


def merge_system_conf(parsed: Iterable[Mapping[str, SystemdSetting]]) -> dict[str, SystemdSetting]:
    """The setting that wins per item: the last file that sets it."""
    merged: dict[str, SystemdSetting] = {}
    for settings in parsed:
        merged.update(settings)
    return merged
