"""Validates the ulimits role's variables, then (when the role is enabled) what pam_limits can
set on the host, read with one command (changes nothing):

    - hostcheck.gpu_hosts.ulimits_validate:
      register: __ulimits_validation

values.conf is {item: {soft, hard}} as limits.conf takes them ('65536', 'unlimited');
values.nr_open is the host's fs.nr_open (only when the role is enabled). The rest is in
plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import re

from ansible_collections.hostcheck.gpu_hosts.plugins.filter.ulimits import (
    ITEMS,
    KINDS,
    ulimits_cap_sys_resource,
    ulimits_conf_value,
    ulimits_grep_files,
    ulimits_host_problems,
    ulimits_pam_limits,
    ulimits_proc_limits,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    Invalid,
    RoleValidation,
)

# A user name, a @group name, or '*'.
DOMAIN = re.compile(r"^(\*|@?[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?)$")
SERVICE = re.compile(r"^[A-Za-z0-9._-]+$")
# fs.nr_open, the limits of PID 1, our own capabilities and the PAM stacks, in one read.
NR_OPEN = "/proc/sys/fs/nr_open"
HOST_READ = ["grep", "-RsH", "", NR_OPEN, "/proc/1/limits", "/proc/self/status", "/etc/pam.d"]
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
    conf: dict, raw: dict, grep_text: str, pam_services: list, pam_fix: str | None
) -> tuple[int, list[str]]:
    """fs.nr_open and the notes (login services this host lacks), from `grep -RsH ''` of
    HOST_READ; Invalid when pam_limits could not apply the values here, or a login service's
    session stack lacks pam_limits.so."""
    files = ulimits_grep_files(grep_text)
    nr_open = int(files[NR_OPEN])
    pid1 = ulimits_proc_limits(files.get("/proc/1/limits", ""))
    may_raise = ulimits_cap_sys_resource(files.get("/proc/self/status", ""))
    problems = ulimits_host_problems(conf, raw, nr_open, pid1, may_raise)
    if problems:
        raise Invalid("; ".join(problems))
    state = ulimits_pam_limits(grep_text, pam_services)
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


class ActionModule(RoleValidation):
    def validate(self) -> dict:
        users = self.var("ulimits_users")
        services = self.var("ulimits_pam_services")
        raw = {item: {kind: self.var(f"ulimits_{item}_{kind}") for kind in KINDS} for item in ITEMS}
        conf = ulimits_conf(users, services, raw)
        note = root_note(users)
        if note:
            self.note(note)
        if not self.enabled():
            return {"conf": conf}
        pam_fix = self.os_vars(
            ["{distribution}-{distribution_major_version}", "{distribution}", "{os_family}"]
        ).get("__ulimits_pam_fix")
        read = self.host_command(HOST_READ)
        if read.get("rc") not in (0, 2) or f"{NR_OPEN}:" not in read.get("stdout", ""):
            raise Invalid(
                f"ulimits: reading the host ({' '.join(HOST_READ[:2])} '' "
                f"{' '.join(HOST_READ[3:])}) failed: rc {read.get('rc')}, "
                f"{(read.get('stderr') or read.get('msg') or 'no ' + NR_OPEN).strip()}"
            )
        nr_open, notes = host_checks(conf, raw, read["stdout"], services, pam_fix)
        for message in notes:
            self.note(message)
        return {"conf": conf, "nr_open": nr_open}
