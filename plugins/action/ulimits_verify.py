"""Verifies the ulimits role on a host, changing nothing (roles/ulimits/tasks/verify.yml):

    - hostcheck.gpu_hosts.ulimits_verify:   # the arguments of ulimits_validate

After the validation (the run's earlier result when no ulimits_* variable changed) it reads the
host with one call of the role's probe module: our limits.d file, a fresh PAM login of each
user (runuser -l, reading /proc/self/limits; nobody stands for '*'), our system.conf.d drop-in
and the manager's DefaultLimit* (systemctl show). It says what holds, or fails naming every
mismatch. Documented in plugins/modules/ulimits_verify.py.
"""

from __future__ import annotations

import os
from collections import Counter

from ansible_collections.hostcheck.gpu_hosts.plugins.action.ulimits_validate import (
    PROBE,
    systemd_skipped,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.ulimits_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.limits_text import (
    ITEMS,
    KINDS,
    systemd_property,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    ulimits_conf_entries,
    ulimits_entries,
    ulimits_login_mismatches,
    ulimits_systemctl_show,
    ulimits_systemd_expected,
    ulimits_systemd_lines,
)

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


class ActionModule(Validation):
    VERIFIES = True

    def verify_reads(self) -> dict:
        return {"logins": login_users(self.arg("ulimits_users")), "systemctl_show": SHOWN}

    def probe_args(self) -> dict:
        """A validation made here reads what verify() needs too: the host is read once."""
        return {**super().probe_args(), **self.verify_reads()}

    def verify(self, values: dict) -> list[str]:
        paths = {
            "limits_file": self.arg("limits_file"),
            "dropin": self.arg("systemd_file"),
            "header": self.arg("header"),
        }
        probed = self.probed or self.on_host(
            PROBE, {"read": [paths["limits_file"], paths["dropin"]], **self.verify_reads()}
        )
        systemd_enabled = self.arg("ulimits_systemd_enabled")
        return verify_limits(probed, values, self.arg("ulimits_users"), systemd_enabled, paths)
