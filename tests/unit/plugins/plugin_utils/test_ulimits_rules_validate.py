"""The ulimits role's validate action: every bad value the old validate.yml refused, named by
its message; the host checks against files standing in for a host (as the probe reads them);
what differs at our limits.d file and system.conf.d drop-in, which decides whether main.yml
changes anything."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    HOST_READ,
    dropin_changes,
    host_checks,
    limits_file_changes,
    path_drift,
    root_note,
    ulimits_conf,
    ulimits_entries,
    ulimits_systemd_dropin,
)

SERVICES = ["sshd", "login", "su-l", "runuser-l"]
DEFAULTS = {
    "nofile": {"soft": 65536, "hard": 1048576},
    "memlock": {"soft": "unlimited", "hard": "unlimited"},
    "nproc": {"soft": 65536, "hard": "unlimited"},
}
SANDBOX = {
    "nofile": {"soft": 16384, "hard": 20000},
    "memlock": {"soft": "8M", "hard": 8192},
    "nproc": {"soft": 65536, "hard": 65536},
}
PID1_LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max processes             unlimited            unlimited            processes
Max open files            1024                 20000                files
Max locked memory         8388608              8388608              bytes
"""
SESSION = "session required pam_limits.so\n"


def raw(**changes) -> dict:
    values = {item: dict(kinds) for item, kinds in SANDBOX.items()}
    for name, value in changes.items():
        item, kind = name.split("_")
        values[item][kind] = value
    return values


def host_files(
    cap_sys_resource: bool = False, pam: dict | None = None, nr_open: int = 1048576
) -> dict:
    """What the probe reads of HOST_READ on a host ({path: text})."""
    return {
        "/proc/sys/fs/nr_open": f"{nr_open}\n",
        "/proc/1/limits": PID1_LIMITS,
        "/proc/self/status": "Name:\tpython3\nCapEff:\t"
        + ("000001ffffffffff" if cap_sys_resource else "00000000a80425fb")
        + "\n",
        **{
            f"/etc/pam.d/{name}": text
            for name, text in (pam or {s: SESSION for s in SERVICES}).items()
        },
    }


def conf_of(values: dict) -> dict:
    return ulimits_conf(["*", "root"], SERVICES, values)


# --- the variables ---------------------------------------------------------------------


def test_the_defaults_and_the_sandbox_values_become_limits_conf_values():
    assert ulimits_conf(["*", "root"], SERVICES, DEFAULTS) == {
        "nofile": {"soft": "65536", "hard": "1048576"},
        "memlock": {"soft": "unlimited", "hard": "unlimited"},
        "nproc": {"soft": "65536", "hard": "unlimited"},
    }
    assert conf_of(SANDBOX)["memlock"] == {"soft": "8192", "hard": "8192"}
    assert ulimits_conf(["@train", "alice", "svc$"], [], SANDBOX)


@pytest.mark.parametrize(
    ("users", "rejected"),
    [
        ([], "[]"),
        (["*", "bad user"], "['bad user']"),
        (["*", "*"], "[]"),
        (["1abc"], "['1abc']"),
        (["@"], "['@']"),
        (["a" * 33], f"['{'a' * 33}']"),
        ([7], "[7]"),
        ("root", "root"),
    ],
)
def test_bad_users_name_ulimits_users(users, rejected):
    with pytest.raises(Invalid) as error:
        ulimits_conf(users, SERVICES, SANDBOX)
    assert str(error.value) == (
        "ulimits_users: a non-empty list of user names, @group names or '*', each once and "
        f"without spaces; got {users}, of which not a user, @group or '*': {rejected}"
    )


@pytest.mark.parametrize("services", [["ss hd"], ["../shadow"], "sshd", [None]])
def test_bad_pam_services_name_ulimits_pam_services(services):
    with pytest.raises(Invalid) as error:
        ulimits_conf(["*"], services, SANDBOX)
    assert str(error.value) == (
        f"ulimits_pam_services: names of files in /etc/pam.d (sshd, login ...); got {services}"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nofile_soft": -1}, "ulimits_nofile_soft: must not be negative"),
        ({"nofile_soft": 0}, "ulimits_nofile_soft: must be larger than zero"),
        ({"nofile_soft": 1.5}, "ulimits_nofile_soft: expected a positive whole number"),
        ({"nofile_hard": True}, "ulimits_nofile_hard: expected a positive whole number"),
        ({"nproc_soft": "lots"}, "ulimits_nproc_soft: expected a positive whole number"),
        ({"nproc_hard": 2**60}, "ulimits_nproc_hard: too large"),
        ({"memlock_soft": "8X"}, "ulimits_memlock_soft: not a size: unknown unit"),
        ({"memlock_hard": "8MB"}, "ulimits_memlock_hard: 8000000 bytes is not a whole"),
    ],
)
def test_bad_limit_values_name_the_variable(change, message):
    with pytest.raises(AnsibleFilterError) as error:
        conf_of(raw(**change))
    assert str(error.value).startswith(message)


def test_the_first_bad_value_in_the_old_order_is_named():
    """users, then the PAM services, then nofile soft/hard, memlock, nproc."""
    with pytest.raises(Invalid, match=r"^ulimits_users: "):
        ulimits_conf([], ["bad name"], raw(nofile_soft=0))
    with pytest.raises(Invalid, match=r"^ulimits_pam_services: "):
        ulimits_conf(["*"], ["bad name"], raw(nofile_soft=0))
    with pytest.raises(AnsibleFilterError, match=r"^ulimits_nofile_hard: "):
        conf_of(raw(nofile_hard=0, memlock_soft=0))


def test_star_without_root_is_said():
    assert "pam_limits never applies '*' or @group lines to" in root_note(["*"])
    assert root_note(["*", "root"]) is None
    assert root_note(["alice"]) is None


# --- the host --------------------------------------------------------------------------


def test_the_host_read_names_the_files_the_checks_use():
    assert set(HOST_READ) == set(host_files()) - {f"/etc/pam.d/{s}" for s in SERVICES} | {
        "/etc/pam.d"
    }


def test_good_values_on_a_host_give_fs_nr_open():
    assert host_checks(conf_of(SANDBOX), SANDBOX, host_files(), SERVICES, None) == (1048576, [])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"nofile_soft": 20000, "nofile_hard": 16384},
            "ulimits_nofile_soft: 20000 is above ulimits_nofile_hard: 16384; a soft limit "
            "cannot exceed its hard limit",
        ),
        (
            {"memlock_soft": "16M", "memlock_hard": 8192},
            "ulimits_memlock_soft: 16M is above ulimits_memlock_hard: 8192",
        ),
        ({"nofile_hard": 2000000}, "ulimits_nofile_hard: 2000000 is above fs.nr_open"),
        (
            {"memlock_hard": "unlimited"},
            "ulimits_memlock_hard: unlimited is above the hard limit PID 1 has here (8192 KiB)",
        ),
    ],
)
def test_values_pam_limits_could_not_apply_here(change, message):
    values = raw(**change)
    with pytest.raises(Invalid) as error:
        host_checks(conf_of(values), values, host_files(), SERVICES, None)
    assert message in str(error.value)


def test_with_cap_sys_resource_pid1_is_no_ceiling():
    values = raw(memlock_hard="unlimited", nofile_hard=1048576)
    assert host_checks(conf_of(values), values, host_files(True), SERVICES, None)[0] == 1048576


def test_every_problem_is_named_at_once():
    values = raw(nofile_soft=30000, nofile_hard=25000, memlock_hard="unlimited")
    with pytest.raises(Invalid) as error:
        host_checks(conf_of(values), values, host_files(), SERVICES, None)
    assert str(error.value).startswith("ulimits_nofile_soft: 30000 is above ulimits_nofile_hard")
    assert "; ulimits_nofile_hard: 25000 is above the hard limit PID 1 has here" in str(error.value)
    assert "; ulimits_memlock_hard: unlimited is above the hard limit PID 1" in str(error.value)


def test_absent_login_services_are_said_not_refused():
    pam = {"sshd": SESSION, "login": SESSION}
    assert host_checks(conf_of(SANDBOX), SANDBOX, host_files(pam=pam), SERVICES, None) == (
        1048576,
        [
            "/etc/pam.d/su-l does not exist here: not checked for pam_limits.so",
            "/etc/pam.d/runuser-l does not exist here: not checked for pam_limits.so",
        ],
    )


@pytest.mark.parametrize(
    ("fix", "remedy"),
    [
        (None, "Fix: add 'session required pam_limits.so' to /etc/pam.d/sshd, login"),
        ("see authselect; or drop {service}", "Fix: see authselect; or drop sshd, login"),
    ],
)
def test_login_services_without_pam_limits_are_refused(fix, remedy):
    pam = {"sshd": "session required pam_unix.so\n", "login": "# " + SESSION, "su-l": SESSION}
    with pytest.raises(Invalid) as error:
        host_checks(conf_of(SANDBOX), SANDBOX, host_files(pam=pam), SERVICES, fix)
    assert str(error.value) == (
        "ulimits_pam_services: the session stack of /etc/pam.d/sshd, /etc/pam.d/login "
        "(includes followed) has no pam_limits.so, so limits.conf is ignored for those logins. "
        + remedy
    )


def test_the_values_are_checked_before_the_pam_stacks():
    values = raw(nofile_hard=2000000)
    pam = {"sshd": "session required pam_unix.so\n"}
    with pytest.raises(Invalid, match=r"^ulimits_nofile_hard: "):
        host_checks(conf_of(values), values, host_files(pam=pam), SERVICES, None)


# --- what differs: main.yml changes something only when this is not empty -------------

LIMITS_FILE = "/etc/security/limits.d/90-hostcheck-training.conf"
DROPIN = "/etc/systemd/system.conf.d/90-hostcheck-training.conf"
HEADER = "# Managed by Ansible (role ulimits); hostcheck's ulimits check reads it."
ROOT_FILE = {"type": "file", "uid": 0, "gid": 0, "mode": "0644"}
ROOT_FOLDER = {"type": "directory", "uid": 0, "gid": 0, "mode": "0755"}
ABSENT = {"type": None}
WANTED = ulimits_entries(["*", "root"], conf_of(SANDBOX))


def limits_text(entries: list) -> str:
    return HEADER + "\n" + "".join("\t".join(entry) + "\n" for entry in entries)


def test_a_provisioned_limits_file_needs_nothing():
    plan, changes = limits_file_changes(LIMITS_FILE, limits_text(WANTED), ROOT_FILE, HEADER, WANTED)
    assert plan == {"remove": [], "set": []}
    assert changes == []


def test_a_missing_limits_file_is_created_with_every_entry():
    plan, changes = limits_file_changes(LIMITS_FILE, None, ABSENT, HEADER, WANTED)
    assert plan == {"remove": [], "set": WANTED}
    assert changes[0] == f"{LIMITS_FILE} does not exist"
    assert changes[1].startswith(f"{LIMITS_FILE} entries to set: ['* soft nofile 16384', ")


def test_an_edited_entry_is_set_again_and_an_unlisted_user_removed():
    edited = [entry if entry[:3] != ["*", "soft", "nofile"] else ["*", "soft", "nofile", "4096"]
              for entry in WANTED]  # fmt: skip
    text = limits_text([*edited, ["alice", "hard", "nproc", "10"]])
    plan, changes = limits_file_changes(LIMITS_FILE, text, ROOT_FILE, HEADER, WANTED)
    assert plan == {
        "remove": [["alice", "hard", "nproc"]],
        "set": [["*", "soft", "nofile", "16384"]],
    }
    assert changes == [
        f"{LIMITS_FILE} entries to remove: ['alice hard nproc']",
        f"{LIMITS_FILE} entries to set: ['* soft nofile 16384']",
    ]


@pytest.mark.parametrize(
    ("text", "state", "said"),
    [
        (limits_text(WANTED).split("\n", 1)[1], ROOT_FILE, "has no header line"),
        (limits_text(WANTED), {**ROOT_FILE, "mode": "0600"}, "mode 0600, not 0644"),
        (limits_text(WANTED), {**ROOT_FILE, "uid": 1000}, "owner 1000:0, not root:root"),
    ],
)
def test_the_header_owner_and_mode_are_kept(text, state, said):
    plan, changes = limits_file_changes(LIMITS_FILE, text, state, HEADER, WANTED)
    assert plan == {"remove": [], "set": []}
    assert changes == [f"{LIMITS_FILE} {said}"]


def test_a_drop_in_as_written_needs_nothing_and_drift_is_seen():
    text = ulimits_systemd_dropin(conf_of(SANDBOX), 1048576)
    stats = {DROPIN: ROOT_FILE, "/etc/systemd/system.conf.d": ROOT_FOLDER}
    assert dropin_changes(DROPIN, text, stats, text) == []
    edited = text.replace("DefaultLimitNOFILE=16384:20000", "DefaultLimitNOFILE=1024:20000")
    assert dropin_changes(DROPIN, edited, stats, text) == [
        f"{DROPIN} does not have the limits of ulimits_* as the role writes them"
    ]
    missing = {DROPIN: ABSENT, "/etc/systemd/system.conf.d": ABSENT}
    assert dropin_changes(DROPIN, None, missing, text) == [
        "/etc/systemd/system.conf.d does not exist",
        f"{DROPIN} does not exist",
    ]


def test_path_drift_names_type_owner_and_mode():
    assert path_drift(ROOT_FOLDER, "directory", "0755") is None
    assert path_drift(ROOT_FILE, "directory", "0755") == "is not a directory"
    assert path_drift({**ROOT_FILE, "gid": 5, "mode": "0664"}, "file", "0644") == (
        "owner 0:5, not root:root, mode 0664, not 0644"
    )


def test_the_drop_in_reads_back_as_the_manager_lines():
    text = ulimits_systemd_dropin(conf_of(SANDBOX), 1048576)
    assert text.endswith(
        "[Manager]\nDefaultLimitNOFILE=16384:20000\n"
        "DefaultLimitMEMLOCK=8388608:8388608\nDefaultLimitNPROC=65536:65536\n"
    )
    assert text.startswith("# Managed by Ansible (role ulimits)")


# --- the action, on this machine (switched off: the host is not read) -------------------
