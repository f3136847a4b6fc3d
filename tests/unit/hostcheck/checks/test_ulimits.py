import os
import re
import shutil
import subprocess

import pytest
from hostcheck._shared import limits_text
from hypothesis import given
from hypothesis import strategies as st

from hostcheck import config as cfgmod
from hostcheck import limits as lim
from hostcheck.checks import ulimits
from hostcheck.checks.base import CheckContext, RunOptions
from hostcheck.model import Status
from hostcheck.system import System
from hostcheck.units import UNLIMITED

MiB = 2**20
RUNUSER = ("runuser", "-l", "-s", "/bin/sh", "-c", ulimits.LOGIN_COMMAND)
SYSTEMCTL = (
    "systemctl", "show",
    "-p", "DefaultLimitNOFILESoft", "-p", "DefaultLimitNOFILE",
    "-p", "DefaultLimitMEMLOCKSoft", "-p", "DefaultLimitMEMLOCK",
    "-p", "DefaultLimitNPROCSoft", "-p", "DefaultLimitNPROC",
)  # fmt: skip
PASSWD = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n"
GROUP = "root:x:0:\nalice:x:1000:\ntraining:x:2000:alice\nvideo:x:44:bob\n"
RUNUSER_L = (
    "auth include runuser\nsession optional pam_keyinit.so force revoke\nsession include runuser\n"
)
RUNUSER_PAM = (
    "auth sufficient pam_rootok.so\nsession required pam_limits.so\nsession required pam_unix.so\n"
)


def config(**overrides):
    section = {
        "user": None,
        "scopes": ["process", "login", "systemd"],
        "min_nofile_soft": 16384,
        "min_nofile_hard": 20000,
        "min_memlock_soft": "8MiB",
        "min_memlock_hard": "8MiB",
        "min_nproc_soft": 4096,
        "min_nproc_hard": 4096,
        "pam_services": ["sshd", "login", "su-l", "runuser-l"],
    }
    section.update(overrides)
    return section


def proc_limits(nofile=(20000, 20000), memlock=(8 * MiB, 8 * MiB), nproc=(96365, 96365)):
    return lim.format_proc_limits(
        [
            ("Max cpu time", UNLIMITED, UNLIMITED, "seconds"),
            ("Max stack size", 8 * MiB, UNLIMITED, "bytes"),
            ("Max processes", *nproc, "processes"),
            ("Max open files", *nofile, "files"),
            ("Max locked memory", *memlock, "bytes"),
            ("Max nice priority", 0, 0, ""),
            ("Max realtime timeout", UNLIMITED, UNLIMITED, "us"),
        ]
    )


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def names(result):
    return [f.name for f in result.findings]


@pytest.fixture
def host(fake_host):
    """Root, started from bash (pid 321), with the limits this machine has."""
    fake_host.file("/proc/self/limits", proc_limits())
    fake_host.file("/proc/self/status", "Name:\tpython\nPPid:\t321\nUid:\t0\t0\t0\t0\n")
    fake_host.file("/proc/321/comm", "bash\n")
    fake_host.file("/proc/sys/fs/nr_open", "1048576\n")
    fake_host.file("/etc/passwd", PASSWD)
    fake_host.file("/etc/group", GROUP)
    fake_host.file("/etc/security/limits.conf", "# nothing\n")
    fake_host.file("/etc/pam.d/runuser-l", RUNUSER_L)
    fake_host.file("/etc/pam.d/runuser", RUNUSER_PAM)
    return fake_host


def login_as(host, user, **values):
    host.command(
        [*RUNUSER, user], "Max open files 1 1 from a profile script\n" + proc_limits(**values)
    )


def run(host, options=None, **overrides):
    return ulimits.run(host.context(config(**overrides), options))


# --- this process ------------------------------------------------------------------------------


def test_process_limits_are_read_and_attributed_to_the_parent(host):
    result = run(host, scopes=["process"])
    soft = finding(result, "process nofile soft")
    assert soft.measured == 20000
    assert soft.status == Status.PASS
    assert soft.source == "this process (inherited from bash, pid 321)"
    assert finding(result, "process memlock hard").measured == 8 * MiB
    assert finding(result, "process memlock hard").display == "8.0 MiB"
    assert finding(result, "process nproc soft").measured == 96365
    assert result.data["process"]["limits"]["nofile"] == {"soft": 20000, "hard": 20000}
    assert result.status == Status.PASS


def test_process_fails_one_above_the_hard_limit_and_names_the_variable(host):
    result = run(host, scopes=["process"], min_nofile_hard=20001, min_memlock_soft="9MiB")
    assert finding(result, "process nofile hard").status == Status.FAIL
    assert finding(result, "process nofile hard").expected == ">= 20001"
    assert finding(result, "process nofile soft").status == Status.PASS
    assert finding(result, "process memlock soft").status == Status.FAIL
    assert result.status == Status.FAIL
    assert "ulimits_nofile_hard, ulimits_memlock_soft" in result.remedy
    assert "--tags ulimits" in result.remedy
    assert "bash, pid 321" in result.remedy


def test_unlimited_meets_any_minimum_and_an_unlimited_minimum_needs_unlimited(host):
    host.file("/proc/self/limits", proc_limits(memlock=(UNLIMITED, UNLIMITED)))
    result = run(host, scopes=["process"], min_memlock_soft="unlimited", min_memlock_hard=2**62)
    assert finding(result, "process memlock soft").measured == "unlimited"
    assert finding(result, "process memlock soft").status == Status.PASS
    assert finding(result, "process memlock hard").status == Status.PASS
    result = run(host, scopes=["process"], min_nproc_hard="unlimited")
    assert finding(result, "process nproc hard").status == Status.FAIL
    assert finding(result, "process nproc hard").expected == ">= unlimited"


def test_a_missing_minimum_is_not_checked(host):
    result = run(host, scopes=["process"], min_nofile_soft=None)
    assert finding(result, "process nofile soft").expected == "no minimum set"
    assert finding(result, "process nofile soft").status == Status.PASS


def test_unreadable_proc_limits_is_an_error(fake_host):
    result = ulimits.run(fake_host.context(config(scopes=["process"])))
    assert result.status == Status.ERROR


# --- login ------------------------------------------------------------------------------------


def test_login_value_attributed_to_the_limits_d_line_that_sets_it(host):
    host.file(
        "/etc/security/limits.d/90-training.conf",
        "# training users\n*   soft nofile 4096\nalice soft nofile 18000\n"
        "@training - memlock unlimited\n",
    )
    login_as(host, "alice", nofile=(18000, 20000), memlock=(UNLIMITED, UNLIMITED))
    result = run(host, RunOptions(user="alice"), scopes=["login"])
    soft = finding(result, "login nofile soft")
    assert soft.measured == 18000
    assert soft.status == Status.PASS
    assert soft.source == (
        "login of alice via runuser -l (PAM): /etc/security/limits.d/90-training.conf:3"
    )
    memlock = finding(result, "login memlock hard")
    assert memlock.measured == "unlimited"
    assert memlock.source.endswith("90-training.conf:4")
    hard = finding(result, "login nofile hard")
    assert "no entry in limits.conf or limits.d" in hard.source
    assert result.data["login"]["entries"]["nofile soft"].endswith("90-training.conf:3")
    assert result.data["login"]["files_read"] == [
        "/etc/security/limits.conf",
        "/etc/security/limits.d/90-training.conf",
    ]


def test_profile_user_is_used_and_option_overrides_it(host):
    login_as(host, "alice")
    login_as(host, "root", nofile=(1024, 20000))
    result = run(host, scopes=["login"], user="alice")
    assert finding(result, "login nofile soft").measured == 20000
    result = run(host, RunOptions(user="root"), scopes=["login"], user="alice")
    assert finding(result, "login nofile soft").measured == 1024
    assert finding(result, "login nofile soft").status == Status.FAIL
    assert "list root in ulimits_users" in result.remedy


def test_limits_d_is_read_after_limits_conf_in_name_order(host):
    host.file("/etc/security/limits.conf", "alice soft nofile 1000\n")
    host.file("/etc/security/limits.d/b.conf", "alice soft nofile 3000\n")
    host.file("/etc/security/limits.d/a.conf", "alice soft nofile 2000\n")
    host.file("/etc/security/limits.d/c.conf.disabled", "alice soft nofile 9999\n")
    login_as(host, "alice", nofile=(3000, 20000))
    result = run(host, RunOptions(user="alice"), scopes=["login"])
    assert finding(result, "login nofile soft").source.endswith("/etc/security/limits.d/b.conf:1")
    assert "asks" not in finding(result, "login nofile soft").source


def test_wildcard_does_not_apply_to_root_but_the_name_does(host):
    host.file("/etc/security/limits.conf", "* - nofile 1500\n@root - nproc 5000\n")
    login_as(host, "root", nofile=(1024, 20000))
    result = run(host, RunOptions(user="root"), scopes=["login"])
    assert "no entry" in finding(result, "login nofile soft").source
    assert "no entry" in finding(result, "login nproc soft").source
    host.file("/etc/security/limits.d/root.conf", "root - nofile 1600\n")
    login_as(host, "root", nofile=(1600, 1600))
    result = run(host, RunOptions(user="root"), scopes=["login"])
    assert finding(result, "login nofile hard").source.endswith("root.conf:1")
    assert finding(result, "login nofile hard").status == Status.FAIL  # 1600 < 20000


def test_a_setting_the_session_did_not_get_is_shown(host):
    host.file("/etc/security/limits.conf", "alice - nofile 65536\n")
    login_as(host, "alice", nofile=(20000, 20000))
    result = run(host, RunOptions(user="alice"), scopes=["login"])
    source = finding(result, "login nofile hard").source
    assert "limits.conf:1 asks 65536 but the session has 20000" in source


def test_a_no_limits_line_for_the_user_is_reported(host):
    host.file("/etc/security/limits.conf", "alice - nofile 65536\n@training -\n")
    login_as(host, "alice")
    result = run(host, RunOptions(user="alice"), scopes=["login"])
    assert "limits.conf:2 ('@training -': pam_limits sets no limits)" in (
        finding(result, "login nofile soft").source
    )
    assert result.data["login"]["disabled_by"] == "/etc/security/limits.conf:2"


def test_login_without_pam_limits_says_limits_conf_is_unused(host):
    host.file("/etc/pam.d/runuser", "session required pam_unix.so\n")
    host.file("/etc/security/limits.conf", "alice - nofile 65536\n")
    login_as(host, "alice")
    result = run(host, RunOptions(user="alice"), scopes=["login"])
    assert (
        "pam_limits.so not in /etc/pam.d/runuser-l" in finding(result, "login nofile soft").source
    )
    assert result.data["login"]["pam_limits_in_service"] is False


def test_login_skips_without_a_user(host):
    result = run(host, scopes=["login"], pam_services=[])
    assert finding(result, "login").status == Status.SKIP
    assert "--user" in finding(result, "login").display
    assert result.status == Status.SKIP


def test_login_skips_when_not_root(host):
    host.file("/proc/self/status", "PPid:\t321\nUid:\t1000\t1000\t1000\t1000\n")
    login_as(host, "alice")
    result = run(host, RunOptions(user="alice"), scopes=["login"], pam_services=[])
    assert finding(result, "login").status == Status.SKIP
    assert "needs root" in finding(result, "login").display
    assert "uid 1000" in finding(result, "login").display


def test_login_skips_without_runuser(host):
    result = run(host, RunOptions(user="alice"), scopes=["login"], pam_services=[])
    assert finding(result, "login").status == Status.SKIP
    assert "runuser" in finding(result, "login").display


def test_unknown_user_is_an_error(host):
    login_as(host, "alice")
    result = run(host, RunOptions(user="mallory"), scopes=["login"], pam_services=[])
    assert finding(result, "login mallory").status == Status.ERROR
    assert result.status == Status.ERROR


def test_user_only_known_to_nss_is_found_through_getent(host):
    host.command(["getent", "passwd", "ldapuser"], "ldapuser:*:5000:5000::/home/l:/bin/sh\n")
    host.command(["id", "-Gn", "ldapuser"], "ldapuser ml\n")
    host.command(["id", "-G", "ldapuser"], "5000 6000\n")
    host.file("/etc/security/limits.conf", "@ml soft nofile 17000\n@:6000 hard nofile 19000\n")
    login_as(host, "ldapuser", nofile=(17000, 19000))
    result = run(host, RunOptions(user="ldapuser"), scopes=["login"], pam_services=[])
    assert finding(result, "login nofile soft").source.endswith("limits.conf:1")
    assert finding(result, "login nofile hard").source.endswith("limits.conf:2")
    assert result.data["login"]["uid"] == 5000


def test_a_login_that_fails_to_open_fails(host):
    host.command(
        [*RUNUSER, "alice"], "", rc=1, stderr="runuser: cannot open session: Permission denied\n"
    )
    result = run(host, RunOptions(user="alice"), scopes=["login"], pam_services=[])
    failed = finding(result, "login alice")
    assert failed.status == Status.FAIL
    assert failed.measured == "runuser: cannot open session: Permission denied"
    assert result.status == Status.FAIL


# --- PAM services -------------------------------------------------------------------------------


def test_pam_stacks_followed_through_include_and_debian_include(host):
    host.file("/etc/pam.d/sshd", "@include common-auth\n@include common-session\n")
    host.file(
        "/etc/pam.d/common-session",
        "session [default=1] pam_permit.so\nsession required pam_unix.so\n",
    )
    host.file("/etc/pam.d/login", "session    required   pam_limits.so\n")
    result = run(host, scopes=["login"])
    pam = finding(result, "pam_limits")
    assert pam.status == Status.WARN
    assert pam.measured == {"sshd": False, "login": True, "runuser-l": True}
    assert "missing from sshd" in pam.display
    assert "/etc/pam.d/sshd" in pam.remedy
    host.file(
        "/etc/pam.d/common-session",
        "session required pam_unix.so\nsession required pam_limits.so\n",
    )
    assert finding(run(host, scopes=["login"]), "pam_limits").status == Status.PASS


def test_pam_check_skips_when_no_service_is_installed(host):
    result = run(host, scopes=["login"], pam_services=["sshd", "gdm"])
    assert finding(result, "pam_limits").status == Status.SKIP


# --- systemd ------------------------------------------------------------------------------------

SHOW = (
    "DefaultLimitNOFILE=524288\nDefaultLimitNOFILESoft=65536\n"
    "DefaultLimitMEMLOCK=infinity\nDefaultLimitMEMLOCKSoft=infinity\n"
    "DefaultLimitNPROC=127000\nDefaultLimitNPROCSoft=127000\n"
)


@pytest.fixture
def systemd_host(host):
    host.file("/run/systemd/system/.keep", "")
    host.command(SYSTEMCTL, SHOW)
    host.file("/etc/systemd/system.conf", "[Manager]\n#DefaultLimitNOFILE=1024:524288\n")
    return host


def test_systemd_skips_where_systemd_does_not_run(host):
    result = run(host, scopes=["systemd"])
    assert finding(result, "systemd").status == Status.SKIP
    assert "/run/systemd/system" in finding(result, "systemd").display


def test_systemd_defaults_attributed_to_the_drop_in(systemd_host):
    systemd_host.file(
        "/etc/systemd/system.conf.d/90-ulimits.conf",
        "[Manager]\nDefaultLimitNOFILE=65536:524288\nDefaultLimitMEMLOCK=infinity\n",
    )
    result = run(
        systemd_host, scopes=["systemd"], min_nofile_soft=65536, min_memlock_hard="unlimited"
    )
    soft = finding(result, "systemd nofile soft")
    assert soft.measured == 65536
    assert soft.status == Status.PASS
    assert soft.source == (
        "systemd manager defaults (system.conf and system.conf.d drop-ins): "
        "/etc/systemd/system.conf.d/90-ulimits.conf:2"
    )
    assert finding(result, "systemd memlock hard").measured == "unlimited"
    assert finding(result, "systemd memlock hard").source.endswith("90-ulimits.conf:3")
    assert "built-in default" in finding(result, "systemd nproc soft").source
    assert result.status == Status.PASS


def test_systemd_drop_in_not_yet_applied_is_shown(systemd_host):
    systemd_host.file(
        "/usr/lib/systemd/system.conf.d/90-ulimits.conf", "[Manager]\nDefaultLimitNPROC=1\n"
    )
    systemd_host.file(
        "/etc/systemd/system.conf.d/90-ulimits.conf", "[Manager]\nDefaultLimitNOFILE=1048576\n"
    )
    result = run(systemd_host, scopes=["systemd"], min_nofile_hard=1048576)
    hard = finding(result, "systemd nofile hard")
    assert hard.status == Status.FAIL
    assert "sets 1048576 but the manager has 524288" in hard.source
    assert "daemon-reexec" in hard.source
    # the /etc drop-in shadows the /usr/lib one of the same name
    assert "built-in default" in finding(result, "systemd nproc hard").source
    assert "ulimits_systemd_enabled" in result.remedy


def test_systemd_below_minimum_fails(systemd_host):
    systemd_host.command(SYSTEMCTL, SHOW.replace("Soft=65536", "Soft=1024"))
    result = run(systemd_host, scopes=["systemd"], min_nofile_soft=65536)
    assert finding(result, "systemd nofile soft").measured == 1024
    assert finding(result, "systemd nofile soft").status == Status.FAIL
    assert "ulimits_nofile_soft" in result.remedy


def test_systemctl_failing_is_an_error(systemd_host):
    systemd_host.command(SYSTEMCTL, "", rc=1, stderr="Failed to connect to bus")
    result = run(systemd_host, scopes=["systemd"])
    assert finding(result, "systemd").status == Status.ERROR
    assert finding(result, "systemd").display == "Failed to connect to bus"


def test_no_scope_means_skipped(host):
    assert run(host, scopes=[]).status == Status.SKIP


# --- profile schema ---------------------------------------------------------------------------


def validate_section(section):
    schema = cfgmod.build_schema({"ulimits": ulimits.SCHEMA})
    cfgmod.validate({"checks": {"ulimits": section}}, schema, "test")


def test_schema_accepts_sizes_and_unlimited_for_memlock_and_rejects_nonsense():
    validate_section(config(min_memlock_soft="64MiB", min_memlock_hard="unlimited"))
    validate_section(config(min_memlock_soft=65536, min_nofile_soft="unlimited"))
    with pytest.raises(cfgmod.ConfigError, match=r"ulimits\.min_nofile_soft"):
        validate_section(config(min_nofile_soft="64k"))
    with pytest.raises(cfgmod.ConfigError, match=r"ulimits\.scopes"):
        validate_section(config(scopes=["process", "cron"]))
    assert ulimits.parse_minimum("memlock", "64MiB") == 64 * MiB
    assert ulimits.parse_minimum("memlock", "unlimited") == UNLIMITED
    assert ulimits.parse_minimum("nofile", -1) == UNLIMITED


# --- parsers --------------------------------------------------------------------------------------


def user(name="alice", uid=1000, gid=1000, groups=("alice", "training"), gids=(1000, 2000)):
    return lim.UserInfo(name, uid, gid, frozenset(groups), frozenset(gids))


def resolve(text, who=None, nr_open=1048576):
    return lim.resolve_limits(lim.parse_limits_conf(text, "f"), who or user(), nr_open)


def test_user_entry_beats_group_entry_beats_wildcard_in_any_order():
    res = resolve("alice soft nofile 3\n@training soft nofile 2\n* soft nofile 1\n")
    assert res.get("nofile", "soft").value == 3
    res = resolve("* soft nofile 1\n@training soft nofile 2\n")
    assert res.get("nofile", "soft").value == 2
    assert res.get("nofile", "soft").line.lineno == 2


def test_later_entry_of_the_same_strength_wins():
    res = resolve("@training hard nproc 10\n@alice hard nproc 20\n")
    assert res.get("nproc", "hard").value == 20


def test_dash_type_stops_at_a_held_soft_limit_as_pam_limits_does():
    res = resolve("alice soft nofile 5\n@training - nofile 7\n")
    assert res.get("nofile", "soft").value == 5
    assert res.get("nofile", "hard") is None


def test_values_units_and_unlimited():
    res = resolve("alice - memlock 4096\nalice - nofile unlimited\nalice soft nproc -1\n")
    assert res.get("memlock", "hard").value == 4 * MiB
    assert res.get("nofile", "soft").value == 1048576  # fs.nr_open
    assert res.get("nproc", "soft").value == UNLIMITED
    res = resolve("alice - nofile bogus\nalice - nice -5\n")
    assert res.get("nofile", "soft") is None


def test_uid_and_gid_ranges():
    assert resolve("1000: soft nofile 9\n").get("nofile", "soft").value == 9
    assert resolve(":1000 soft nofile 9\n").get("nofile", "soft").value == 9
    assert resolve("500:999 soft nofile 9\n").get("nofile", "soft") is None
    assert resolve("@1000:1000 soft nofile 9\n").get("nofile", "soft").value == 9
    assert resolve("@:2000 soft nofile 9\n").get("nofile", "soft").value == 9  # supplementary
    assert resolve("@2000: soft nofile 9\n").get("nofile", "soft") is None  # primary only
    assert resolve("x:y soft nofile 9\n").get("nofile", "soft") is None
    root = lim.UserInfo("root", 0, 0, frozenset({"root"}), frozenset({0}))
    assert resolve("0: soft nofile 9\n", root).get("nofile", "soft").value == 9
    assert resolve("@root soft nofile 9\n", root).get("nofile", "soft") is None


def test_lookup_user_collects_primary_and_supplementary_groups():
    info = lim.lookup_user("alice", PASSWD, GROUP)
    assert info == lim.UserInfo("alice", 1000, 1000, frozenset({"alice", "training"}),
                                frozenset({1000, 2000}))  # fmt: skip
    assert lim.lookup_user("bob", PASSWD, GROUP) is None


def test_parse_real_looking_proc_limits():
    text = (
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max processes             96365                96365                processes \n"
        "Max open files            20000                20000                files     \n"
        "Max locked memory         8388608              8388608              bytes     \n"
        "Max nice priority         0                    0                    \n"
    )
    assert lim.proc_items(text) == {
        "nofile": {"soft": 20000, "hard": 20000},
        "memlock": {"soft": 8 * MiB, "hard": 8 * MiB},
        "nproc": {"soft": 96365, "hard": 96365},
    }
    assert lim.parse_proc_limits(text)["Max nice priority"] == (0, 0)


def test_system_conf_and_systemctl_show_parsing():
    conf = "[Manager]\nDefaultLimitMEMLOCK=8M:infinity\n[Other]\nDefaultLimitNOFILE=5\n"
    parsed = lim.parse_system_conf(conf, "/etc/systemd/system.conf")
    assert parsed["memlock"].value == (8 * MiB, UNLIMITED)
    assert "nofile" not in parsed
    assert lim.parse_systemd_limit("nofile", "1024") == (1024, 1024)
    assert lim.parse_systemd_limit("nofile", "1024:") is None
    assert lim.parse_systemctl_show("DefaultLimitNOFILE=infinity\nX=1\n") == {
        "DefaultLimitNOFILE": UNLIMITED
    }


# --- property-based -----------------------------------------------------------------------------

limit_values = st.one_of(st.integers(min_value=0, max_value=2**63), st.just(UNLIMITED))
proc_name = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=1, max_size=8)
proc_names = st.lists(proc_name, min_size=1, max_size=4).map(lambda w: "Max " + " ".join(w))
units_text = st.sampled_from(["", "files", "bytes", "processes", "us", "seconds"])


@given(st.lists(st.tuples(proc_names, limit_values, limit_values, units_text), max_size=20))
def test_proc_limits_round_trip(rows):
    parsed = lim.parse_proc_limits(lim.format_proc_limits(rows))
    expected = {name: (soft, hard) for name, soft, hard, _ in rows}
    assert parsed == expected


@given(st.text())
def test_parsers_never_crash_on_arbitrary_text(text):
    lim.parse_proc_limits(text)
    lim.proc_items(text)
    lines = lim.parse_limits_conf(text, "x")
    lim.resolve_limits(lines, user(), 1048576)
    lim.parse_system_conf(text, "x")
    lim.parse_systemctl_show(text)
    limits_text.pam_modules("svc", lambda s: text if s == "svc" else None)


domains = st.one_of(
    st.sampled_from(["*", "alice", "bob", "@training", "@video", "%", "1000:", ":1000", "@2000:"]),
    st.from_regex(r"[a-z@%][a-z0-9_]{0,6}", fullmatch=True),
)
entries = st.tuples(
    domains,
    st.sampled_from(["soft", "hard", "-", "SOFT"]),
    st.sampled_from(["nofile", "memlock", "nproc", "core", "NoFile"]),
    st.one_of(st.integers(0, 2**40).map(str), st.sampled_from(["unlimited", "-1", "infinity"])),
)
blank = st.sampled_from([" ", "\t", "  ", " \t "])


@given(st.lists(st.tuples(entries, blank, st.booleans()), max_size=15))
def test_limits_conf_round_trip(rows):
    text = ""
    for (domain, kind, item, value), gap, comment in rows:
        text += gap + gap.join([domain, kind, item, value]) + (" # note" if comment else "") + "\n"
        if comment:
            text += "# a comment line\n\n"
    parsed = lim.parse_limits_conf(text, "conf")
    assert [(p.domain, p.type, p.item, p.value) for p in parsed] == [
        (d, k.lower(), i.lower(), v.lower()) for (d, k, i, v), _, _ in rows
    ]
    assert len({p.lineno for p in parsed}) == len(rows)


@given(st.lists(entries, max_size=12), st.integers(0, 2**30), st.data())
def test_a_user_entry_wins_wherever_it_is_placed(others, value, data):
    alice = user()
    others = [e for e in others if lim.entry_source(e[0], alice) != lim.USER]
    body = [f"{d} {k} {i} {v}\n" for d, k, i, v in others]
    position = data.draw(st.integers(0, len(body)))
    res = resolve("".join([*body[:position], f"alice - nofile {value}\n", *body[position:]]))
    for kind in ("soft", "hard"):
        assert res.get("nofile", kind).value == value
        assert res.get("nofile", kind).source == lim.USER
        assert res.get("nofile", kind).line.lineno == position + 1


@given(st.dictionaries(st.sampled_from(["NOFILE", "MEMLOCK", "NPROC"]),
                       st.tuples(limit_values, limit_values)))  # fmt: skip
def test_systemctl_show_round_trip(values):
    text = ""
    for name, (soft, hard) in values.items():
        for key, value in ((f"DefaultLimit{name}Soft", soft), (f"DefaultLimit{name}", hard)):
            text += f"{key}={'infinity' if value == UNLIMITED else value}\n"
    parsed = lim.parse_systemctl_show(text)
    expected = {}
    for name, (soft, hard) in values.items():
        expected[f"DefaultLimit{name}Soft"] = soft
        expected[f"DefaultLimit{name}"] = hard
    assert parsed == expected


# --- the real machine ----------------------------------------------------------------------------

ULIMIT_SCRIPT = "ulimit -Sn; ulimit -Hn; ulimit -Sl; ulimit -Hl; ulimit -Su; ulimit -Hu"


def bash_ulimits(argv):
    """(item, kind) -> value from bash's ulimit builtin (memlock converted from KiB)."""
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    values = out.split()
    assert len(values) == 6, out
    keys = [(i, k) for i in ("nofile", "memlock", "nproc") for k in ("soft", "hard")]
    result = {}
    for (item, kind), text in zip(keys, values):
        number = UNLIMITED if text == "unlimited" else int(text)
        result[(item, kind)] = (
            number * 1024 if item == "memlock" and number != UNLIMITED else number
        )
    return result


def measured(result, scope):
    values = {}
    for item in ("nofile", "memlock", "nproc"):
        for kind in ("soft", "hard"):
            raw = finding(result, f"{scope} {item} {kind}").measured
            values[(item, kind)] = UNLIMITED if raw == "unlimited" else raw
    return values


def real_context(options=None, **overrides):
    return CheckContext(System(), config(**overrides), options or RunOptions())


@pytest.mark.real
def test_real_process_limits_match_bash_ulimit():
    if shutil.which("bash") is None:
        pytest.skip("bash not installed")
    result = ulimits.run(real_context(scopes=["process"]))
    assert measured(result, "process") == bash_ulimits(["bash", "-c", ULIMIT_SCRIPT])
    ps = subprocess.run(
        ["ps", "-o", "comm=", "-p", str(os.getppid())], capture_output=True, text=True
    ).stdout.strip()
    assert result.data["process"]["parent"] == f"{ps}, pid {os.getppid()}"


def need_root_login():
    if os.geteuid() != 0:
        pytest.skip("a PAM login through runuser needs root")
    if shutil.which("runuser") is None or shutil.which("bash") is None:
        pytest.skip("runuser or bash not installed")


@pytest.mark.real
def test_real_login_of_root_matches_bash_ulimit_in_a_login():
    need_root_login()
    result = ulimits.run(real_context(RunOptions(user="root"), scopes=["login"]))
    independent = bash_ulimits(["runuser", "-l", "root", "-s", "/bin/bash", "-c", ULIMIT_SCRIPT])
    assert measured(result, "login") == independent
    assert all(
        f.source.startswith("login of root via runuser -l (PAM): ")
        for f in result.findings
        if f.name.startswith("login ")
    )


@pytest.fixture
def temporary_limits_file():
    """A limits.d file for the duration of one test, always removed afterwards."""
    need_root_login()
    path = f"/etc/security/limits.d/zz-hostcheck-test-{os.getpid()}.conf"
    if not os.path.isdir("/etc/security/limits.d") or not os.access(
        "/etc/security/limits.d", os.W_OK
    ):
        pytest.skip("/etc/security/limits.d is not writable")
    try:
        yield path
    finally:
        if os.path.exists(path):
            os.remove(path)


@pytest.mark.real
def test_real_login_value_comes_from_the_temporary_limits_d_line(temporary_limits_file):
    # Values lower than this machine's hard limits (nofile 20000, memlock 8 MiB): root may
    # always lower them. `*` must be ignored for root, the root line must win.
    with open(temporary_limits_file, "w") as handle:
        handle.write("* - nofile 1400\nroot - nofile 1500\nroot hard memlock 4096\n")
    result = ulimits.run(real_context(RunOptions(user="root"), scopes=["login"]))
    os.remove(temporary_limits_file)
    nofile = finding(result, "login nofile soft")
    if "pam_limits.so not in" in nofile.source:
        pytest.skip("runuser-l does not run pam_limits here")
    assert nofile.measured == 1500
    assert nofile.source.endswith(f"{temporary_limits_file}:2")
    memlock = finding(result, "login memlock hard")
    assert memlock.measured == 4 * MiB
    assert memlock.source.endswith(f"{temporary_limits_file}:3")
    again = bash_ulimits(["runuser", "-l", "root", "-s", "/bin/bash", "-c", ULIMIT_SCRIPT])
    assert again[("nofile", "soft")] != 1500  # the file is gone: nothing was left behind


@pytest.mark.real
def test_real_systemd_defaults_match_systemctl_or_skip():
    if not os.path.isdir("/run/systemd/system"):
        result = ulimits.run(real_context(scopes=["systemd"]))
        assert finding(result, "systemd").status == Status.SKIP
        pytest.skip("systemd is not running on this machine (no /run/systemd/system)")
    result = ulimits.run(real_context(scopes=["systemd"]))
    out = subprocess.run(
        ["systemctl", "show", "--value", "-p", "DefaultLimitNOFILESoft"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert str(finding(result, "systemd nofile soft").measured) == (
        "unlimited" if out == "infinity" else out
    )


@pytest.mark.real
def test_real_pam_finding_agrees_with_grep():
    result = ulimits.run(real_context(scopes=["login"], pam_services=["runuser", "su"]))
    pam = finding(result, "pam_limits")
    for service in ("runuser", "su"):
        path = f"/etc/pam.d/{service}"
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            text = handle.read()
        direct = bool(re.search(r"^\s*-?session\s+\S+\s+pam_limits\.so", text, re.M))
        if direct:
            assert pam.measured[service] is True
