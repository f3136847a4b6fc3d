"""Validates the ulimits role's variables, then (when the role is enabled) reads the host with
one call of the role's probe module (changes nothing): what pam_limits can set here, and how our
limits.d file and system.conf.d drop-in differ from what the variables want.

    - hostcheck.gpu_hosts.ulimits_validate:
        ulimits_users: "{{ ulimits_users }}"      # ... every ulimits_* variable
        limits_file: "{{ __ulimits_limits_file }}"
        systemd_file: "{{ __ulimits_systemd_file }}"
        header: "{{ __ulimits_header }}"
        validated: "{{ __ulimits_validation | default({}) }}"
      register: __ulimits_validation

The values returned are documented in plugins/modules/ulimits_validate.py; when
values.changes is empty, main.yml includes no task that changes anything. The base is
plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

import os
import re
from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.limits_text import ITEMS, KINDS
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    ulimits_cap_sys_resource,
    ulimits_conf_value,
    ulimits_entries,
    ulimits_host_problems,
    ulimits_pam_limits,
    ulimits_plan,
    ulimits_proc_limits,
    ulimits_systemd_dropin,
)

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


class ActionModule(RoleAction):
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
