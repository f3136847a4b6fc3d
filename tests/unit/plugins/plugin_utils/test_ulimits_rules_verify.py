"""The ulimits role's verify action: the comparison of what the probe read (the limits.d file,
fresh logins, the drop-in, systemctl show) with the validated values, on plain data; the
messages are those the integration tests and operators look for."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    SHOWN,
    login_users,
    ulimits_entries,
    ulimits_systemd_dropin,
    ulimits_systemd_expected,
    verify_limits,
)

LIMITS_FILE = "/etc/security/limits.d/90-hostcheck-training.conf"
DROPIN = "/etc/systemd/system.conf.d/90-hostcheck-training.conf"
HEADER = "# Managed by Ansible (role ulimits); hostcheck's ulimits check reads it."
PATHS = {"limits_file": LIMITS_FILE, "dropin": DROPIN, "header": HEADER}
NR_OPEN = 1048576
CONF = {
    "nofile": {"soft": "16384", "hard": "20000"},
    "memlock": {"soft": "8192", "hard": "8192"},
    "nproc": {"soft": "65536", "hard": "65536"},
}
VALUES = {"conf": CONF, "nr_open": NR_OPEN}
USERS = ["*", "root"]


def proc_limits(nofile=("16384", "20000"), nproc=("65536", "65536")) -> str:
    rows = [
        ("Max cpu time", "unlimited", "unlimited", "seconds"),
        ("Max processes", *nproc, "processes"),
        ("Max open files", *nofile, "files"),
        ("Max locked memory", "8388608", "8388608", "bytes"),
    ]
    return "Limit                     Soft Limit           Hard Limit           Units\n" + "".join(
        f"{name:<26}{soft:<21}{hard:<21}{units}\n" for name, soft, hard, units in rows
    )


def logged_in(text: str | None = None) -> dict:
    return {"exists": True, "rc": 0, "stdout": text or proc_limits(), "stderr": ""}


def show(expected: dict) -> dict:
    return {"rc": 0, "stdout": "".join(f"{k}={v}\n" for k, v in expected.items()), "stderr": ""}


def probed(**changes) -> dict:
    """A provisioned host as the probe reads it."""
    entries = ulimits_entries(USERS, CONF)
    host = {
        "files": {
            LIMITS_FILE: HEADER + "\n" + "".join("\t".join(e) + "\n" for e in entries),
            DROPIN: ulimits_systemd_dropin(CONF, NR_OPEN),
        },
        "systemd": True,
        "logins": {"root": logged_in(), "nobody": logged_in()},
        "systemctl_show": show(ulimits_systemd_expected(CONF, NR_OPEN)),
    }
    host.update(changes)
    return host


def failure(host: dict, users=USERS, systemd_enabled=True) -> str:
    with pytest.raises(Invalid) as error:
        verify_limits(host, VALUES, users, systemd_enabled, PATHS)
    return str(error.value)


def test_a_provisioned_host_holds_and_says_what_was_proved():
    said = verify_limits(probed(), VALUES, USERS, True, PATHS)
    assert said == [
        f"{LIMITS_FILE} has the 12 entries wanted",
        "logins of root, nobody get the limits of ulimits_*",
        "systemd gives new services {'DefaultLimitNOFILE': '20000', 'DefaultLimitNOFILESoft': "
        "'16384', 'DefaultLimitMEMLOCK': '8388608', 'DefaultLimitMEMLOCKSoft': '8388608', "
        "'DefaultLimitNPROC': '65536', 'DefaultLimitNPROCSoft': '65536'}",
    ]


def test_the_users_logged_in_are_those_named_and_nobody_for_star():
    assert login_users(["*", "root", "@train", "alice"]) == ["root", "alice", "nobody"]
    assert login_users(["*", "nobody"]) == ["nobody"]
    assert login_users(["root"]) == ["root"]
    assert sorted(SHOWN) == sorted(ulimits_systemd_expected(CONF, NR_OPEN))


def test_an_edited_entry_is_named_missing_and_not_wanted():
    host = probed()
    host["files"][LIMITS_FILE] = host["files"][LIMITS_FILE].replace(
        "*\tsoft\tnofile\t16384", "*\tsoft\tnofile\t4096"
    )
    host["logins"]["nobody"] = logged_in(proc_limits(nofile=("4096", "20000")))
    text = failure(host)
    assert text.startswith(f"{LIMITS_FILE} does not match ulimits_users and ulimits_*: ")
    assert "missing ['* soft nofile 16384'], not wanted ['* soft nofile 4096']" in text
    # every mismatch at once: the login of nobody too
    assert (
        "a login of nobody (standing for '*') does not get the limits of ulimits_*: "
        "nofile soft: has 4096, wanted 16384; a user or @group entry elsewhere" in text
    )


def test_a_duplicate_entry_and_a_lost_header_are_drift():
    host = probed()
    text = host["files"][LIMITS_FILE]
    host["files"][LIMITS_FILE] = text + "root\thard\tnproc\t65536\n"
    assert "missing [], not wanted ['root hard nproc 65536']" in failure(host)
    host["files"][LIMITS_FILE] = text.split("\n", 1)[1]
    assert failure(host).endswith(f"missing [], not wanted [] (its first line is not {HEADER!r})")


def test_a_missing_file_is_named():
    host = probed()
    del host["files"][LIMITS_FILE]
    assert failure(host).split(";")[0].endswith("'root hard nproc 65536'], not wanted [] "
                                                "(the file does not exist)")  # fmt: skip


def test_a_stronger_entry_elsewhere_shows_in_the_login_of_root():
    host = probed()
    host["logins"]["root"] = logged_in(proc_limits(nproc=("65536", "4096")))
    text = failure(host)
    assert text.startswith("a login of root does not get the limits of ulimits_*: ")
    assert "nproc hard: has 4096, wanted 65536" in text
    assert "a file read after 90-hostcheck-training.conf overrides it" in text


def test_a_failed_login_fails_verify():
    host = probed()
    host["logins"]["root"] = {"exists": True, "rc": 1, "stdout": "", "stderr": "runuser: x\n"}
    assert failure(host) == "a login of root failed (runuser -l, rc 1): runuser: x"


def test_unknown_users_and_groups_are_said_checked_in_the_file_only():
    users = ["*", "root", "ghost", "@train"]
    entries = ulimits_entries(users, CONF)
    host = probed()
    host["files"][LIMITS_FILE] = HEADER + "\n" + "".join("\t".join(e) + "\n" for e in entries)
    host["logins"]["ghost"] = {"exists": False}
    said = verify_limits(host, VALUES, users, True, PATHS)
    assert said[1] == (
        f"checked in {LIMITS_FILE} only, not with a live login: ghost, @train "
        "(no such user here: ghost)"
    )
    assert said[2] == "logins of root, nobody get the limits of ulimits_*"


def test_a_manager_not_reexecuted_fails_naming_the_remedy():
    expected = ulimits_systemd_expected(CONF, NR_OPEN)
    host = probed(systemctl_show=show({**expected, "DefaultLimitNOFILESoft": "1024"}))
    text = failure(host)
    assert text.startswith("systemd does not give services the limits of ulimits_*: ")
    assert "'DefaultLimitNOFILESoft': '1024'" in text
    assert text.endswith("(systemctl daemon-reexec applies the drop-in)")


def test_an_edited_drop_in_fails():
    host = probed()
    host["files"][DROPIN] = host["files"][DROPIN].replace("NPROC=65536:65536", "NPROC=512:512")
    assert f"{DROPIN} should have ['DefaultLimitNOFILE=16384:20000'," in failure(host)


def test_a_failed_systemctl_show_is_named():
    host = probed(systemctl_show={"rc": 1, "stdout": "", "stderr": "Failed to connect\n"})
    assert failure(host).endswith("; systemctl show failed (rc 1): Failed to connect")


@pytest.mark.parametrize(
    ("systemd_enabled", "running", "said"),
    [
        (False, True, "ulimits_systemd_enabled is false"),
        (True, False, "systemd is not the init system here (no /run/systemd/system)"),
    ],
)
def test_services_not_verified_say_why(systemd_enabled, running, said):
    host = probed(systemd=running, systemctl_show=None)
    del host["files"][DROPIN]
    lines = verify_limits(host, VALUES, USERS, systemd_enabled, PATHS)
    assert lines[-1] == f"{said}: the limits of services are not verified"
