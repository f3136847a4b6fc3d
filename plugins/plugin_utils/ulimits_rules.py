"""The ulimits role's rules, for its validate and verify actions: the variables' values checked
strictly and translated for limits.conf, for systemd and for the kernel; what pam_limits could
not apply on a host; the PAM session stacks as pam_limits sees them; our limits.d file read,
planned and compared; logins' /proc/self/limits and the manager's DefaultLimit* compared with
the values. limits.conf, /proc/<pid>/limits, PAM stacks and `systemctl show` are read by
plugins/module_utils/limits_text.py, as hostcheck reads them.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import ClassVar

from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import limits_text
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.limits_text import (
    ITEMS,
    KINDS,
    systemd_property,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import parse_size
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

RLIM_INFINITY = limits_text.RLIM_INFINITY
# No limit, as the variables may spell it; -1, which limits.conf also takes, is refused (a
# negative number is a typo more often than a wish), so is anything else with a sign.
UNLIMITED_WORDS = ("unlimited", "infinity")
# Far above any real limit and below every overflow: pam_limits multiplies memlock by 1024.
MAX_VALUE = 2**53
_INT = re.compile(r"^[0-9]+$")
_SIZE_WITH_UNIT = re.compile(r"^[0-9.]+\s*[A-Za-z]+$")


def _fail(name: str, value: object, why: str) -> AnsibleFilterError:
    return AnsibleFilterError(f"{name}: {why} (got {value!r})")


def ulimits_conf_value(value: object, name: str, item: str) -> str:
    """The value to write into limits.conf for `item`: a positive integer as a string, or
    'unlimited'. memlock takes KiB (a plain number, as limits.conf has it) or a size with a
    unit as module_utils/sizes.py reads it (64M = 64MiB = 65536 KiB, 64MB = 62500 KiB);
    nofile and nproc take plain counts."""
    if item not in ITEMS:
        raise AnsibleFilterError(f"{name}: unknown limit item {item!r}")
    usage = (
        "a positive number of KiB (as limits.conf), a size such as 64M, 64MiB or 64MB, or "
        "'unlimited'"
        if item == "memlock"
        else "a positive whole number or 'unlimited'"
    )
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _fail(name, value, f"expected {usage}")
    text = str(value) if isinstance(value, int) else value.strip()
    if text in UNLIMITED_WORDS:
        return "unlimited"
    if _INT.match(text):
        number = int(text)
    elif item == "memlock" and _SIZE_WITH_UNIT.match(text):
        number = _memlock_kib(text, name, value)
    elif text.startswith("-"):
        raise _fail(name, value, f"must not be negative: use {usage}")
    else:
        raise _fail(name, value, f"expected {usage}")
    if number <= 0:
        raise _fail(name, value, "must be larger than zero (0 forbids every file/process/page)")
    if number > MAX_VALUE // (1024 if item == "memlock" else 1):
        raise _fail(name, value, "too large: use 'unlimited' for no limit")
    return str(number)


def _memlock_kib(text: str, name: str, value: object) -> int:
    """KiB for limits.conf from a size with a unit (module_utils/sizes.py: 64GB decimal,
    64GiB and 64G binary); a size that is not whole KiB is refused rather than rounded."""
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise _fail(
            name, value, f"{exc}; use KiB, MiB, GiB, K, M, G (binary) or KB, MB, GB"
        ) from None
    if size % 1024:
        raise _fail(
            name, value, f"{size} bytes is not a whole number of KiB (limits.conf counts KiB)"
        )
    return size // 1024


def ulimits_rlimit(conf_value: object, item: str, nr_open: object = None) -> int:
    """The rlimit pam_limits sets from a limits.conf value as ulimits_conf_value writes it
    (kernel units: bytes for memlock). 'unlimited' is RLIM_INFINITY, except nofile, where
    pam_limits uses fs.nr_open."""
    text = str(conf_value)
    if text != "unlimited" and not _INT.match(text):
        raise AnsibleFilterError(f"not a limits.conf value for {item}: {conf_value!r}")
    if text == "unlimited" and item == "nofile":
        try:
            nr_open = int(str(nr_open))
        except ValueError:
            raise AnsibleFilterError(f"fs.nr_open not known ({nr_open!r})") from None
    return limits_text.conf_value_rlimit(item, text, RLIM_INFINITY, nr_open)


def ulimits_systemd_value(conf_value: object, item: str, nr_open: object = None) -> str:
    """The value for DefaultLimitXXX= in system.conf: a number (bytes for memlock) or
    'infinity'; nofile 'unlimited' is spelled as fs.nr_open, which is what the kernel allows."""
    value = ulimits_rlimit(conf_value, item, nr_open)
    return "infinity" if value == RLIM_INFINITY else str(value)


def _var(item: str, kind: str) -> str:
    return f"ulimits_{item}_{kind}"


def _kib_or_count(item: str, value: int) -> str:
    if value == RLIM_INFINITY:
        return "unlimited"
    return f"{value // 1024} KiB" if item == "memlock" else str(value)


def ulimits_host_problems(
    conf: dict, raw: dict, nr_open: object, pid1: dict, may_raise: bool
) -> list[str]:
    """Why pam_limits could not apply these values on this host, one message per problem,
    each naming the variable: a soft limit above its hard limit, nofile above fs.nr_open
    (the kernel refuses it), and, where root lacks CAP_SYS_RESOURCE (containers, the
    sandbox), a hard limit above the one PID 1 has (no login can raise it). `raw` holds
    the variables as given ({item: {kind: value}}), for the messages."""
    problems = []
    for item in ITEMS:
        soft = ulimits_rlimit(conf[item]["soft"], item, nr_open)
        hard = ulimits_rlimit(conf[item]["hard"], item, nr_open)
        if soft > hard:
            problems.append(
                f"{_var(item, 'soft')}: {raw[item]['soft']} is above {_var(item, 'hard')}: "
                f"{raw[item]['hard']}; a soft limit cannot exceed its hard limit"
            )
    if conf["nofile"]["hard"] != "unlimited" and int(conf["nofile"]["hard"]) > int(str(nr_open)):
        problems.append(
            f"ulimits_nofile_hard: {raw['nofile']['hard']} is above fs.nr_open of this host "
            f"({nr_open}): the kernel refuses it, so pam_limits would fail to set nofile at "
            f"every login. Use at most {nr_open} ('unlimited' means fs.nr_open) or raise "
            "fs.nr_open first"
        )
    if not may_raise:
        for item in ITEMS:
            hard = ulimits_rlimit(conf[item]["hard"], item, nr_open)
            ceiling = pid1.get(item, {}).get("hard")
            if ceiling is not None and hard > ceiling:
                problems.append(
                    f"{_var(item, 'hard')}: {raw[item]['hard']} is above the hard limit PID 1 "
                    f"has here ({_kib_or_count(item, ceiling)}), and root lacks "
                    "CAP_SYS_RESOURCE (a container?), so pam_limits cannot raise it and logins "
                    f"would keep their old limits. Use at most {_kib_or_count(item, ceiling)}"
                )
    return problems


def ulimits_proc_limits(text: object) -> dict[str, dict[str, int]]:
    """{"nofile": {"soft": .., "hard": ..}, ...} from /proc/<pid>/limits text (anything
    printed before the table is ignored); unlimited is RLIM_INFINITY."""
    return limits_text.proc_items(str(text), RLIM_INFINITY)


def ulimits_grep_files(grep_text: object) -> dict[str, str]:
    """{path: text} from `grep -RsH '' PATH...` output (path:line), so one command reads
    many files; empty files do not appear."""
    files: dict[str, list[str]] = {}
    for line in str(grep_text).splitlines():
        path, sep, rest = line.partition(":")
        if sep:
            files.setdefault(path, []).append(rest)
    return {path: "\n".join(lines) + "\n" for path, lines in files.items()}


def ulimits_cap_sys_resource(status_text: object) -> bool:
    """Whether the process whose /proc/<pid>/status this is has CAP_SYS_RESOURCE (24)
    effective: without it no process may raise a hard limit above the one it has."""
    match = re.search(r"^CapEff:\s*([0-9a-fA-F]+)\s*$", str(status_text), re.MULTILINE)
    if not match:
        raise AnsibleFilterError("no CapEff line in /proc/self/status")
    return bool(int(match.group(1), 16) >> 24 & 1)


def ulimits_pam_limits(grep_text: object, services: list) -> dict[str, str]:
    """For each service: 'present' when its session stack runs pam_limits.so, 'missing'
    when it does not (limits.conf is then ignored for those logins), 'absent' when
    /etc/pam.d has no such file. `grep_text` is `grep -r '' /etc/pam.d` output
    (path:line), or the files already split ({path: text})."""
    by_path = grep_text if isinstance(grep_text, Mapping) else ulimits_grep_files(grep_text)
    files = {
        path[len("/etc/pam.d/") :]: text
        for path, text in by_path.items()
        if path.startswith("/etc/pam.d/")
    }
    state = {}
    for service in services:
        modules = limits_text.pam_modules(service, files.get)
        if service not in files:
            state[service] = "absent"
        elif "pam_limits.so" in map(limits_text.module_name, modules):
            state[service] = "present"
        else:
            state[service] = "missing"
    return state


def ulimits_entries(users: list, conf: dict) -> list[list[str]]:
    """The limits.conf entries for `users`: [domain, type, item, value], soft and hard lines
    of every item (never `-`: when a stronger entry holds the soft half, pam_limits drops
    the hard half of a `-` line too)."""
    return [
        [user, kind, item, str(conf[item][kind])]
        for user in users
        for kind in KINDS
        for item in ITEMS
    ]


def ulimits_conf_entries(text: object) -> list[list[str]]:
    """[domain, type, item, value] of every entry of a limits.conf file, in file order, as
    written: limits.yml removes the lines of a key by matching it as written."""
    return [
        [entry.domain, entry.type, entry.item, entry.value]
        for entry in limits_text.limits_conf_entries(str(text or ""))
        if entry.item is not None
    ]


def ulimits_plan(text: object, wanted: list) -> dict[str, list[list[str]]]:
    """What to do to our limits file so it holds exactly `wanted` ([domain, type, item,
    value] entries): `remove` the keys ([domain, type, item]) of entries not wanted or
    written more than once (every line of such a key goes), then `set` the wanted entries
    that are not left in the file as they should be."""
    now = ulimits_conf_entries(text)
    keys_now = [entry[:3] for entry in now]
    keys_wanted = [entry[:3] for entry in wanted]
    remove: list[list[str]] = []
    for key in keys_now:
        if (key not in keys_wanted or keys_now.count(key) > 1) and key not in remove:
            remove.append(key)
    kept = [entry for entry in now if entry[:3] not in remove]
    return {"remove": remove, "set": [entry for entry in wanted if entry not in kept]}


def _show(item: str, value: int) -> str:
    if value == RLIM_INFINITY:
        return "unlimited"
    if item == "memlock":
        return f"{value // 1024} KiB" if value % 1024 == 0 else f"{value} bytes"
    return str(value)


def ulimits_login_mismatches(proc_text: object, conf: dict, nr_open: object) -> list[str]:
    """What a login's /proc/self/limits has that differs from the role's values, one
    'item kind: has X, wanted Y' per difference; [] when everything matches."""
    live = ulimits_proc_limits(proc_text)
    found = []
    for item in ITEMS:
        for kind in KINDS:
            wanted = ulimits_rlimit(conf[item][kind], item, nr_open)
            has = live.get(item, {}).get(kind)
            if has is None:
                found.append(f"{item} {kind}: not in /proc/self/limits")
            elif has != wanted:
                found.append(f"{item} {kind}: has {_show(item, has)}, wanted {_show(item, wanted)}")
    return found


DROPIN_HEAD = [
    "# Managed by Ansible (role ulimits): the limits of systemd services (limits.conf is for",
    "# PAM logins only). Applied by systemctl daemon-reexec; a running service keeps its limits",
    "# until restarted. Edits are overwritten.",
    "[Manager]",
]


def ulimits_systemd_expected(conf: dict, nr_open: object) -> dict[str, str]:
    """{"DefaultLimitNOFILE": hard, "DefaultLimitNOFILESoft": soft, ...} as `systemctl show`
    prints them (numbers, memlock in bytes, or infinity)."""
    return {
        systemd_property(item, kind): ulimits_systemd_value(conf[item][kind], item, nr_open)
        for item in ITEMS
        for kind in reversed(KINDS)
    }


def ulimits_systemd_lines(conf: dict, nr_open: object) -> list[str]:
    """The [Manager] lines of our system.conf.d drop-in: DefaultLimitNOFILE=soft:hard ..."""
    return [
        f"{systemd_property(item, 'hard')}="
        + ":".join(ulimits_systemd_value(conf[item][kind], item, nr_open) for kind in KINDS)
        for item in ITEMS
    ]


def ulimits_systemd_dropin(conf: dict, nr_open: object) -> str:
    """The text of our system.conf.d drop-in."""
    return "\n".join([*DROPIN_HEAD, *ulimits_systemd_lines(conf, nr_open), ""])


def ulimits_systemctl_show(text: object) -> dict[str, str]:
    """{"DefaultLimitNOFILE": "524288", ...} from `systemctl show -p ...`; no limit (infinity,
    or RLIM_INFINITY printed as a number) is "infinity"."""
    shown = limits_text.parse_systemctl_show(str(text), RLIM_INFINITY)
    return {
        key: "infinity" if value == RLIM_INFINITY else str(value) for key, value in shown.items()
    }


# A user name, a @group name, or '*'.
DOMAIN = re.compile(r"^(\*|@?[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?)$")
SERVICE = re.compile(r"^[A-Za-z0-9._-]+$")
PROBE = "hostcheck.gpu_hosts.ulimits_probe"
# fs.nr_open, the limits of PID 1, our own capabilities and the PAM stacks.
NR_OPEN = "/proc/sys/fs/nr_open"
HOST_READ = [NR_OPEN, "/proc/1/limits", "/proc/self/status", "/etc/pam.d"]
DEFAULT_PAM_FIX = "add 'session required pam_limits.so' to /etc/pam.d/{service}"


def _matches(pattern: re.Pattern, value: object) -> bool:
    return isinstance(value, str) and pattern.match(value) is not None


def ulimits_conf(users: object, pam_services: object, raw: dict) -> dict:
    """{item: {kind: limits.conf value}} from the variables as given (`raw` is {item: {kind:
    value of ulimits_<item>_<kind>}}), or Invalid naming the variable."""
    users_list = users if isinstance(users, list) else []
    not_domains = [user for user in users_list if not _matches(DOMAIN, user)]
    if (
        not isinstance(users, list)
        or not users
        or not_domains
        or len({str(user) for user in users}) != len(users)
    ):
        raise Invalid(
            "ulimits_users: a non-empty list of user names, @group names or '*', each once and "
            f"without spaces; got {users}, of which not a user, @group or '*': "
            f"{not_domains if isinstance(users, list) else users}"
        )
    if not isinstance(pam_services, list) or not all(
        _matches(SERVICE, service) for service in pam_services
    ):
        raise Invalid(
            "ulimits_pam_services: names of files in /etc/pam.d (sshd, login ...); "
            f"got {pam_services}"
        )
    return {
        item: {
            kind: ulimits_conf_value(raw[item][kind], f"ulimits_{item}_{kind}", item)
            for kind in KINDS
        }
        for item in ITEMS
    }


def root_note(users: list) -> str | None:
    if "*" in users and "root" not in users:
        return (
            "ulimits_users has '*' but not root: pam_limits never applies '*' or @group lines to "
            "root, so root's logins keep their limits; list root to include it"
        )
    return None


def host_checks(
    conf: dict, raw: dict, files: dict, pam_services: list, pam_fix: str | None
) -> tuple[int, list[str]]:
    """fs.nr_open and the notes (login services this host lacks), from the files of HOST_READ
    ({path: text}, as the probe reads them); Invalid when pam_limits could not apply the values
    here, or a login service's session stack lacks pam_limits.so."""
    nr_open = int(files[NR_OPEN])
    pid1 = ulimits_proc_limits(files.get("/proc/1/limits", ""))
    may_raise = ulimits_cap_sys_resource(files.get("/proc/self/status", ""))
    problems = ulimits_host_problems(conf, raw, nr_open, pid1, may_raise)
    if problems:
        raise Invalid("; ".join(problems))
    state = ulimits_pam_limits(files, pam_services)
    notes = [
        f"/etc/pam.d/{service} does not exist here: not checked for pam_limits.so"
        for service in pam_services
        if state[service] == "absent"
    ]
    missing = [service for service, found in state.items() if found == "missing"]
    if missing:
        fix = (pam_fix or DEFAULT_PAM_FIX).replace("{service}", ", ".join(missing))
        stacks = ", /etc/pam.d/".join(missing)
        raise Invalid(
            f"ulimits_pam_services: the session stack of /etc/pam.d/{stacks} "
            "(includes followed) has no pam_limits.so, so limits.conf is ignored for those "
            f"logins. Fix: {fix}"
        )
    return nr_open, notes


def systemd_skipped(systemd_enabled: bool) -> str:
    """Why services are not given the limits here (systemd_enabled false, or no systemd)."""
    if not systemd_enabled:
        return "ulimits_systemd_enabled is false"
    return "systemd is not the init system here (no /run/systemd/system)"


def path_drift(state: dict, kind: str, mode: str) -> str | None:
    """How a path (the probe's stat of it) differs from a `kind` root owns with `mode`."""
    if state.get("type") is None:
        return "does not exist"
    if state["type"] != kind:
        return f"is not a {kind}"
    wrong = []
    if (state["uid"], state["gid"]) != (0, 0):
        wrong.append(f"owner {state['uid']}:{state['gid']}, not root:root")
    if state["mode"] != mode:
        wrong.append(f"mode {state['mode']}, not {mode}")
    return ", ".join(wrong) or None


def limits_file_changes(
    path: str, text: str | None, state: dict, header: str, wanted: list
) -> tuple[dict, list[str]]:
    """The plan for our limits.d file (its entries to remove and to set, as limits.yml does
    them) and what differs there ([] when nothing does)."""
    plan = ulimits_plan(text or "", wanted)
    differs = []
    drift = path_drift(state, "file", "0644")
    if drift:
        differs.append(drift)
    elif header not in (text or "").splitlines():
        differs.append("has no header line")
    if plan["remove"]:
        differs.append(f"entries to remove: {[' '.join(key) for key in plan['remove']]}")
    if plan["set"]:
        differs.append(f"entries to set: {[' '.join(entry) for entry in plan['set']]}")
    return plan, [f"{path} {what}" for what in differs]


def dropin_changes(path: str, text: str | None, stats: dict, wanted_text: str) -> list[str]:
    """What differs at our system.conf.d drop-in and its folder ([] when nothing does)."""
    folder = os.path.dirname(path)
    differs = []
    drift = path_drift(stats[folder], "directory", "0755")
    if drift:
        differs.append(f"{folder} {drift}")
    drift = path_drift(stats[path], "file", "0644")
    if drift:
        differs.append(f"{path} {drift}")
    if text != wanted_text and stats[path].get("type") == "file":
        differs.append(f"{path} does not have the limits of ulimits_* as the role writes them")
    return differs


class Validation(RoleAction):
    ROLE = "ulimits"
    INTERNAL: ClassVar[dict] = {
        "limits_file": {"type": "path", "required": True},
        "systemd_file": {"type": "path", "required": True},
        "header": {"type": "str", "required": True},
    }
    SWITCHED_OFF = "limits.d and systemd left as they are"
    # what validate() read on the host (the probe's result); None until it has
    probed: dict | None = None

    def validate(self) -> dict:
        users = self.arg("ulimits_users")
        services = self.arg("ulimits_pam_services")
        raw = {item: {kind: self.arg(f"ulimits_{item}_{kind}") for kind in KINDS} for item in ITEMS}
        conf = ulimits_conf(users, services, raw)
        systemd_enabled = self.arg("ulimits_systemd_enabled")
        note = root_note(users)
        if note:
            self.note(note)
        if not self.enabled():
            return {"conf": conf}
        pam_fix = self.os_vars().get("__ulimits_pam_fix")
        limits_file, dropin = self.arg("limits_file"), self.arg("systemd_file")
        self.probed = self.on_host(PROBE, self.probe_args())
        files = self.probed["files"]
        if NR_OPEN not in files:
            raise Invalid(f"ulimits: reading the host failed: no {NR_OPEN}")
        nr_open, notes = host_checks(conf, raw, files, services, pam_fix)
        for message in notes:
            self.note(message)
        plan, changes = limits_file_changes(
            limits_file,
            files.get(limits_file),
            self.probed["stat"][limits_file],
            self.arg("header"),
            ulimits_entries(users, conf),
        )
        systemd = systemd_enabled and self.probed["systemd"]
        dropin_text = ulimits_systemd_dropin(conf, nr_open)
        if systemd:
            changes += dropin_changes(dropin, files.get(dropin), self.probed["stat"], dropin_text)
        elif not self.VERIFIES:
            self.note(
                f"{systemd_skipped(systemd_enabled)}: no system.conf.d drop-in; services keep "
                "the limits their parent gives them"
            )
        return {
            "conf": conf,
            "nr_open": nr_open,
            "plan": plan,
            "systemd": systemd,
            "dropin": dropin_text,
            "changes": changes,
        }

    def probe_args(self) -> dict:
        """What validate() reads: the files of HOST_READ, and ours with their owners and modes."""
        limits_file, dropin = self.arg("limits_file"), self.arg("systemd_file")
        return {
            "read": [*HOST_READ, limits_file, dropin],
            "stat": [limits_file, os.path.dirname(dropin), dropin],
        }


# The manager's properties systemd gives new services from our drop-in.
SHOWN = [systemd_property(item, kind) for item in ITEMS for kind in reversed(KINDS)]


def login_users(users: list) -> list[str]:
    """The users to open a login for: those named, and nobody standing for '*'."""
    named = [user for user in users if not user.startswith(("*", "@"))]
    return named + (["nobody"] if "*" in users and "nobody" not in users else [])


def limits_file_verdict(
    path: str, text: str | None, header: str, wanted: list
) -> tuple[list[str], list[str]]:
    """(what holds, what does not) of our limits.d file against the wanted entries."""
    found = ulimits_conf_entries(text or "")
    found_count = Counter(map(tuple, found))
    wanted_count = Counter(map(tuple, wanted))
    header_first = text is not None and text.split("\n", 1)[0] == header
    if found_count == wanted_count and header_first:
        return [f"{path} has the {len(wanted)} entries wanted"], []
    missing = [" ".join(entry) for entry in (wanted_count - found_count).elements()]
    unwanted = [" ".join(entry) for entry in (found_count - wanted_count).elements()]
    problem = (
        f"{path} does not match ulimits_users and ulimits_*: missing {missing}, "
        f"not wanted {unwanted}"
    )
    if text is None:
        problem += " (the file does not exist)"
    elif not header_first:
        problem += f" (its first line is not {header!r})"
    return [], [problem]


def logins_verdict(
    logins: dict, users: list, conf: dict, nr_open: object, limits_file: str
) -> tuple[list[str], list[str]]:
    """(what holds, what does not) of the fresh logins ({user: the probe's login result})."""
    said, problems = [], []
    unknown = [user for user, login in logins.items() if not login["exists"]]
    groups = [user for user in users if user.startswith("@")]
    if unknown or groups:
        said.append(
            f"checked in {limits_file} only, not with a live login: "
            + ", ".join(unknown + groups)
            + (f" (no such user here: {', '.join(unknown)})" if unknown else "")
        )
    who = {} if "nobody" in users else {"nobody": "nobody (standing for '*')"}
    wrong = {}
    for user, login in logins.items():
        if not login["exists"]:
            continue
        if login["rc"] != 0:
            problems.append(
                f"a login of {who.get(user, user)} failed (runuser -l, rc {login['rc']}): "
                f"{login['stderr'].strip()}"
            )
            continue
        differences = ulimits_login_mismatches(login["stdout"], conf, nr_open)
        if differences:
            wrong[user] = differences
    if wrong:
        problems.append(
            "".join(
                f"a login of {who.get(user, user)} does not get the limits of ulimits_*: "
                f"{', '.join(differences)}; "
                for user, differences in wrong.items()
            )
            + "a user or @group entry elsewhere in limits.conf or limits.d beats '*', a file "
            f"read after {os.path.basename(limits_file)} overrides it, or a hard limit above "
            "the one the login's parent has cannot be set: 'hostcheck run --user NAME' names "
            "the line"
        )
    checked = [user for user, login in logins.items() if login["exists"]]
    if checked and not problems:
        said.append(f"logins of {', '.join(checked)} get the limits of ulimits_*")
    return said, problems


def systemd_verdict(
    systemd_enabled: bool,
    systemd_running: bool,
    dropin: str,
    text: str | None,
    show: dict | None,
    conf: dict,
    nr_open: object,
) -> tuple[list[str], list[str]]:
    """(what holds, what does not) of the drop-in and the manager's DefaultLimit*."""
    if not (systemd_enabled and systemd_running):
        return [f"{systemd_skipped(systemd_enabled)}: the limits of services are not verified"], []
    lines = ulimits_systemd_lines(conf, nr_open)
    expected = ulimits_systemd_expected(conf, nr_open)
    shown = ulimits_systemctl_show(show["stdout"]) if show and show["rc"] == 0 else {}
    if shown == expected and set(lines) <= set((text or "").splitlines()):
        return [f"systemd gives new services {shown}"], []
    problem = (
        f"systemd does not give services the limits of ulimits_*: {dropin} should have "
        f"{lines}; the manager has {shown}, wanted {expected} (systemctl daemon-reexec "
        "applies the drop-in)"
    )
    if show and show["rc"] != 0:
        problem += f"; systemctl show failed (rc {show['rc']}): {show['stderr'].strip()}"
    return [], [problem]


def verify_limits(
    probed: dict,
    values: dict,
    users: list,
    systemd_enabled: bool,
    paths: dict,
) -> list[str]:
    """What holds on the host the probe read, or Invalid naming every mismatch. `paths` has
    limits_file, dropin and header (the role's vars/main.yml)."""
    files = probed["files"]
    conf, nr_open = values["conf"], values["nr_open"]
    verdicts = [
        limits_file_verdict(
            paths["limits_file"],
            files.get(paths["limits_file"]),
            paths["header"],
            ulimits_entries(users, conf),
        ),
        logins_verdict(probed["logins"], users, conf, nr_open, paths["limits_file"]),
        systemd_verdict(
            systemd_enabled,
            probed["systemd"],
            paths["dropin"],
            files.get(paths["dropin"]),
            probed["systemctl_show"],
            conf,
            nr_open,
        ),
    ]
    problems = [problem for dummy, found in verdicts for problem in found]
    if problems:
        raise Invalid("; ".join(problems))
    return [line for said, dummy in verdicts for line in said]
