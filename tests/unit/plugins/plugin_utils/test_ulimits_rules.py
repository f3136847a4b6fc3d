"""The ulimits role's rules (plugins/plugin_utils/ulimits_rules.py) and files, including the
parts that cannot run in the sandbox: the RHEL PAM stacks (authselect's system-auth /
password-auth) and the systemd drop-in, made as the role writes it and read back with
hostcheck's parsers, so the role writes what hostcheck's ulimits check reads."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    RLIM_INFINITY,
    ulimits_cap_sys_resource,
    ulimits_conf_entries,
    ulimits_conf_value,
    ulimits_entries,
    ulimits_grep_files,
    ulimits_host_problems,
    ulimits_login_mismatches,
    ulimits_pam_limits,
    ulimits_plan,
    ulimits_proc_limits,
    ulimits_rlimit,
    ulimits_systemctl_show,
    ulimits_systemd_dropin,
    ulimits_systemd_expected,
    ulimits_systemd_lines,
)
from hostcheck._shared import limits_text
from hypothesis import given
from hypothesis import strategies as st

from hostcheck import limits as lim
from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from tests.paths import CHECKOUT

ROLE = CHECKOUT / "roles" / "ulimits"
NR_OPEN = 1048576
CONF = {
    "nofile": {"soft": "16384", "hard": "20000"},
    "memlock": {"soft": "8192", "hard": "unlimited"},
    "nproc": {"soft": "65536", "hard": "unlimited"},
}
RAW = {
    "nofile": {"soft": 16384, "hard": 20000},
    "memlock": {"soft": "8M", "hard": "unlimited"},
    "nproc": {"soft": 65536, "hard": "unlimited"},
}


def yaml_file(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# --- values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "item", "expected"),
    [
        (65536, "nofile", "65536"),
        ("65536", "nofile", "65536"),
        (" 4096 ", "nproc", "4096"),
        ("unlimited", "nproc", "unlimited"),
        ("infinity", "memlock", "unlimited"),
        (8192, "memlock", "8192"),  # KiB, as limits.conf
        ("8M", "memlock", "8192"),
        ("8MiB", "memlock", "8192"),
        ("64 k", "memlock", "64"),
        ("1G", "memlock", "1048576"),
        ("2TiB", "memlock", str(2 * 1024**3)),
    ],
)
def test_values(value, item, expected):
    assert ulimits_conf_value(value, "ulimits_x", item) == expected


@pytest.mark.parametrize(
    ("value", "item", "why"),
    [
        (-1, "nofile", "must not be negative"),
        ("-1", "nproc", "must not be negative"),
        ("-8M", "memlock", "must not be negative"),
        (0, "nofile", "must be larger than zero"),
        ("0M", "memlock", "must be larger than zero"),
        (1.5, "nofile", "expected a positive whole number"),
        ("1.5", "nproc", "expected a positive whole number"),
        ("lots", "nproc", "expected a positive whole number"),
        ("16k", "nofile", "expected a positive whole number"),
        ("", "nofile", "expected"),
        (None, "nofile", "expected"),
        (True, "nofile", "expected"),
        ([1], "nofile", "expected"),
        ("Unlimited", "nofile", "expected"),
        ("8X", "memlock", "not a size: unknown unit"),
        ("8 parsecs", "memlock", "not a size: unknown unit"),
        ("8MB", "memlock", "not a whole number of KiB"),
        ("8kb", "memlock", "not a whole number of KiB"),
        ("8B", "memlock", "not a whole number of KiB"),
        ("1.5.G", "memlock", "not a size"),
        (2**60, "nofile", "too large"),
        (f"{2**50}G", "memlock", "too large"),
    ],
)
def test_bad_values_name_the_variable(value, item, why):
    with pytest.raises(AnsibleFilterError, match=rf"^ulimits_{item}_soft: .*{why}"):
        ulimits_conf_value(value, f"ulimits_{item}_soft", item)


@given(st.integers(min_value=1, max_value=2**30))
def test_memlock_units_are_binary_kib(kib):
    assert ulimits_conf_value(kib, "v", "memlock") == str(kib)
    assert ulimits_conf_value(f"{kib}K", "v", "memlock") == str(kib)
    assert ulimits_rlimit(ulimits_conf_value(f"{kib}M", "v", "memlock"), "memlock") == kib * 2**20


def test_rlimits_follow_pam_limits():
    """pam_limits: memlock is KiB, nofile 'unlimited' is fs.nr_open, the rest RLIM_INFINITY;
    hostcheck's reading of limits.conf values agrees."""
    for item, text in [("nofile", "20000"), ("memlock", "8192"), ("nproc", "unlimited")]:
        expected = lim.parse_conf_value(item, text, NR_OPEN)
        got = ulimits_rlimit(text, item, NR_OPEN)
        assert got == (RLIM_INFINITY if expected == lim.UNLIMITED else expected)
    assert ulimits_rlimit("unlimited", "nofile", NR_OPEN) == NR_OPEN
    assert ulimits_rlimit("unlimited", "memlock", NR_OPEN) == RLIM_INFINITY


def test_proc_limits_of_this_process_match_getrlimit():
    text = Path("/proc/self/limits").read_text()
    parsed = ulimits_proc_limits("motd printed first\n" + text)
    for item, rlimit in [
        ("nofile", resource.RLIMIT_NOFILE),
        ("memlock", resource.RLIMIT_MEMLOCK),
        ("nproc", resource.RLIMIT_NPROC),
    ]:
        soft, hard = resource.getrlimit(rlimit)
        as_proc = [RLIM_INFINITY if v == resource.RLIM_INFINITY else v for v in (soft, hard)]
        assert [parsed[item]["soft"], parsed[item]["hard"]] == as_proc


def test_cap_sys_resource_bit():
    assert ulimits_cap_sys_resource("Name:\tx\nCapEff:\t000001ffffffffff\n") is True
    assert ulimits_cap_sys_resource("CapEff:\t000001fffeffffff\n") is False  # the sandbox
    assert ulimits_cap_sys_resource("CapEff:\t0000000000000000\n") is False
    with pytest.raises(AnsibleFilterError):
        ulimits_cap_sys_resource("Name: x\n")


# --- what pam_limits could not apply on a host ---------------------------------------------


def test_host_problems_none_for_good_values():
    pid1 = {"nofile": {"hard": 20000}, "memlock": {"hard": RLIM_INFINITY}}
    assert ulimits_host_problems(CONF, RAW, NR_OPEN, pid1, may_raise=False) == []


def test_soft_above_hard_across_units():
    conf = {**CONF, "memlock": {"soft": "16384", "hard": "8192"}}
    raw = {**RAW, "memlock": {"soft": "16M", "hard": 8192}}
    (problem,) = ulimits_host_problems(conf, raw, NR_OPEN, {}, may_raise=True)
    assert problem.startswith("ulimits_memlock_soft: 16M is above ulimits_memlock_hard: 8192")


def test_nofile_unlimited_is_nr_open_and_above_it_is_refused():
    conf = {**CONF, "nofile": {"soft": "unlimited", "hard": "unlimited"}}
    assert ulimits_host_problems(conf, RAW, NR_OPEN, {}, may_raise=True) == []
    conf = {**CONF, "nofile": {"soft": "1024", "hard": str(NR_OPEN + 1)}}
    (problem,) = ulimits_host_problems(conf, RAW, NR_OPEN, {}, may_raise=True)
    assert problem.startswith("ulimits_nofile_hard: 20000 is above fs.nr_open of this host")
    # soft 'unlimited' under a numeric hard limit is fs.nr_open, above the hard limit
    conf = {**CONF, "nofile": {"soft": "unlimited", "hard": "65536"}}
    (problem,) = ulimits_host_problems(conf, RAW, NR_OPEN, {}, may_raise=True)
    assert problem.startswith("ulimits_nofile_soft:")


def test_ceiling_only_without_cap_sys_resource():
    pid1 = {"nofile": {"hard": 20000}, "memlock": {"hard": 8 * 2**20}, "nproc": {"hard": 96365}}
    assert ulimits_host_problems(CONF, RAW, NR_OPEN, pid1, may_raise=True) == []
    problems = ulimits_host_problems(CONF, RAW, NR_OPEN, pid1, may_raise=False)
    assert [p.split(":")[0] for p in problems] == ["ulimits_memlock_hard", "ulimits_nproc_hard"]
    assert "Use at most 8192 KiB" in problems[0]
    assert "Use at most 96365" in problems[1]


# --- our limits.d file --------------------------------------------------------------------


def test_entries_are_soft_and_hard_lines_per_user():
    entries = ulimits_entries(["*", "root"], CONF)
    assert len(entries) == 12
    assert ["*", "soft", "memlock", "8192"] in entries
    assert ["root", "hard", "nproc", "unlimited"] in entries
    assert {e[1] for e in entries} == {"soft", "hard"}  # never '-'


def test_plan_removes_stale_and_duplicate_keys_and_sets_the_rest():
    wanted = ulimits_entries(["*"], CONF)
    text = (
        "# header\n"
        "*\tsoft\tnofile\t16384\n"
        "*   soft  nofile  4096   # a hand edit\n"
        "*\thard\tnofile\t20000\n"
        "*\thard\tmemlock\t1024\n"
        "alice\thard\tnproc\t5\n"
    )
    plan = ulimits_plan(text, wanted)
    assert plan["remove"] == [["*", "soft", "nofile"], ["alice", "hard", "nproc"]]
    assert ["*", "hard", "nofile", "20000"] not in plan["set"]  # already right, kept
    assert ["*", "soft", "nofile", "16384"] in plan["set"]  # both duplicates go, then set
    assert ["*", "hard", "memlock", "unlimited"] in plan["set"]
    assert len(plan["set"]) == 5
    done = "\n".join(" ".join(e) for e in wanted)
    assert ulimits_plan(done, wanted) == {"remove": [], "set": []}
    assert ulimits_plan("", wanted) == {"remove": [], "set": wanted}


def test_file_written_from_the_entries_reads_back_in_hostcheck():
    """pam_limits writes 'domain<TAB>type<TAB>item<TAB>value'; hostcheck resolves it for
    root and another user as pam_limits would: '*' does not reach root."""
    text = "# header\n" + "".join("\t".join(e) + "\n" for e in ulimits_entries(["*", "root"], CONF))
    assert ulimits_conf_entries(text) == ulimits_entries(["*", "root"], CONF)
    lines = lim.parse_limits_conf(text, "90-hostcheck-training.conf")
    for user in (lim.UserInfo("root", 0, 0), lim.UserInfo("alice", 1000, 1000)):
        res = lim.resolve_limits(lines, user, NR_OPEN)
        assert res.get("memlock", "soft").value == 8192 * 1024
        assert res.get("nofile", "hard").value == 20000
    only_star = lim.parse_limits_conf(
        "".join("\t".join(e) + "\n" for e in ulimits_entries(["*"], CONF)), "f"
    )
    assert lim.resolve_limits(only_star, lim.UserInfo("root", 0, 0), NR_OPEN).settings == {}


def test_login_mismatches():
    rows = [
        ("Max processes", 65536, lim.UNLIMITED, "processes"),
        ("Max open files", 1024, 20000, "files"),
        ("Max locked memory", 8 * 2**20, lim.UNLIMITED, "bytes"),
    ]
    text = lim.format_proc_limits(rows)
    assert ulimits_login_mismatches(text, CONF, NR_OPEN) == ["nofile soft: has 1024, wanted 16384"]
    assert ulimits_login_mismatches("nothing", CONF, NR_OPEN)[0] == (
        "nofile soft: not in /proc/self/limits"
    )


# --- PAM stacks ---------------------------------------------------------------------------

DEBIAN_PAM = {  # Debian 12, as in the sandbox hosts
    "sshd": "@include common-auth\nsession required pam_loginuid.so\n@include common-session\n"
    "session    required     pam_limits.so\n@include common-password\n",
    "common-session": "session [default=1] pam_permit.so\nsession required pam_unix.so\n",
    "login": "session required pam_limits.so\n@include common-session\n",
    "su": "auth sufficient pam_rootok.so\nsession required pam_limits.so\n",
    "su-l": "auth include su\nsession optional pam_keyinit.so force revoke\nsession include su\n",
    "runuser": "auth sufficient pam_rootok.so\nsession required pam_limits.so\n",
    "runuser-l": "auth include runuser\n-session optional pam_systemd.so\n"
    "session include runuser\n",
}
# RHEL 9 with authselect: services include system-auth / password-auth (symlinks into
# /etc/authselect; grep -R follows them), which hold pam_limits.so.
AUTHSELECT_SESSION = (
    "# Generated by authselect\n# Do not modify this file manually.\n"
    "session     optional                   pam_keyinit.so revoke\n"
    "session     required                   pam_limits.so\n"
    "-session    optional                   pam_systemd.so\n"
    "session     [success=1 default=ignore] pam_succeed_if.so service in crond quiet use_uid\n"
    "session     required                   pam_unix.so\n"
)
RHEL_PAM = {
    "sshd": "#%PAM-1.0\nauth substack password-auth\naccount include password-auth\n"
    "session required pam_selinux.so close\nsession required pam_loginuid.so\n"
    "session optional pam_keyinit.so force revoke\nsession include password-auth\n"
    "session include postlogin\n",
    "password-auth": AUTHSELECT_SESSION,
    "system-auth": AUTHSELECT_SESSION,
    "postlogin": "session optional pam_umask.so silent\nsession [success=1 default=ignore] "
    "pam_succeed_if.so service !~ gdm* service !~ su* quiet\n",
    "login": "#%PAM-1.0\nauth substack system-auth\nsession include system-auth\n"
    "session include postlogin\n",
    "su": "auth sufficient pam_rootok.so\nsession include system-auth\nsession include postlogin\n",
    "su-l": "auth include su\nsession optional pam_keyinit.so force revoke\nsession include su\n",
    "runuser": "auth sufficient pam_rootok.so\nsession include system-auth\n",
    "runuser-l": "auth include runuser\nsession optional pam_keyinit.so force revoke\n"
    "-session optional pam_systemd.so\nsession include runuser\n",
}
SERVICES = ["sshd", "login", "su-l", "runuser-l", "gdm-password"]


def grep_output(files: dict[str, str]) -> str:
    return "".join(
        f"/etc/pam.d/{name}:{line}\n" for name, text in files.items() for line in text.splitlines()
    )


def hostcheck_view(files: dict[str, str], service: str) -> str:
    if service not in files:
        return "absent"
    modules = limits_text.pam_modules(service, files.get)
    return "present" if lim.uses_pam_limits(modules) else "missing"


@pytest.mark.parametrize("files", [DEBIAN_PAM, RHEL_PAM], ids=["debian", "rhel"])
def test_pam_stacks_of_both_families(files):
    state = ulimits_pam_limits(grep_output(files), SERVICES)
    assert state == {s: "present" for s in SERVICES[:4]} | {"gdm-password": "absent"}
    assert state == {s: hostcheck_view(files, s) for s in SERVICES}


@pytest.mark.parametrize("files", [DEBIAN_PAM, RHEL_PAM], ids=["debian", "rhel"])
def test_pam_stacks_read_by_the_probe_as_files_read_alike(files):
    """The role's probe hands over {path: text} (an empty file is one that runs nothing)."""
    by_path = {f"/etc/pam.d/{name}": text for name, text in files.items()}
    assert ulimits_pam_limits(by_path, SERVICES) == ulimits_pam_limits(grep_output(files), SERVICES)
    assert ulimits_pam_limits({**by_path, "/etc/pam.d/sshd": ""}, ["sshd"]) == {"sshd": "missing"}


def test_pam_limits_missing_from_password_auth_reaches_sshd_only():
    files = {**RHEL_PAM, "password-auth": AUTHSELECT_SESSION.replace("pam_limits.so", "pam_x.so")}
    state = ulimits_pam_limits(grep_output(files), SERVICES)
    assert state["sshd"] == "missing"
    assert state["login"] == "present"
    assert state == {s: hostcheck_view(files, s) for s in SERVICES}


def test_commented_and_non_session_lines_do_not_count():
    files = {
        "sshd": "# session required pam_limits.so\nauth required pam_limits.so\n",
        "loop": "session include loop\n",
    }
    assert ulimits_pam_limits(grep_output(files), ["sshd", "loop"]) == {
        "sshd": "missing",
        "loop": "missing",
    }


def test_grep_files_splits_by_path():
    out = "/proc/sys/fs/nr_open:1048576\n/etc/pam.d/a:x:y\n/etc/pam.d/a:z\n"
    assert ulimits_grep_files(out) == {
        "/proc/sys/fs/nr_open": "1048576\n",
        "/etc/pam.d/a": "x:y\nz\n",
    }


@pytest.mark.parametrize("family", ["Debian", "RedHat"])
def test_per_os_remedy(family):
    hint = yaml_file(ROLE / "vars" / f"{family}.yml")["__ulimits_pam_fix"]
    assert "{service}" in hint
    assert ("authselect" in hint) == (family == "RedHat")


# --- systemd ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "conf",
    [
        CONF,
        {
            "nofile": {"soft": "65536", "hard": "unlimited"},
            "memlock": {"soft": "unlimited", "hard": "unlimited"},
            "nproc": {"soft": "65536", "hard": "unlimited"},
        },
    ],
)
def test_systemd_dropin_reads_back_in_hostcheck(conf):
    """The drop-in the role writes on RHEL and Debian alike, read by hostcheck's system.conf
    parser; nofile 'unlimited' is written as fs.nr_open (systemd would clamp infinity)."""
    text = ulimits_systemd_dropin(conf, NR_OPEN)
    assert "[Manager]\n" in text
    parsed = lim.parse_system_conf(text, "90-hostcheck-training.conf")
    for item in ("nofile", "memlock", "nproc"):
        soft, hard = parsed[item].value
        for kind, got in (("soft", soft), ("hard", hard)):
            wanted = ulimits_rlimit(conf[item][kind], item, NR_OPEN)
            assert got == (lim.UNLIMITED if wanted == RLIM_INFINITY else wanted)
    assert [line for line in text.splitlines() if line.startswith("Default")] == (
        ulimits_systemd_lines(conf, NR_OPEN)
    )


def test_systemctl_show_compared_with_the_values():
    expected = ulimits_systemd_expected(CONF, NR_OPEN)
    shown = (
        "DefaultLimitNOFILE=20000\nDefaultLimitNOFILESoft=16384\n"
        f"DefaultLimitMEMLOCK={RLIM_INFINITY}\nDefaultLimitMEMLOCKSoft=8388608\n"
        "DefaultLimitNPROC=infinity\nDefaultLimitNPROCSoft=65536\n"
    )
    assert ulimits_systemctl_show(shown) == expected
    # hostcheck reads the same output to the same numbers
    values = lim.parse_systemctl_show(shown)
    assert values["DefaultLimitMEMLOCKSoft"] == 8 * 2**20
    assert values["DefaultLimitMEMLOCK"] == lim.UNLIMITED


# --- defaults -----------------------------------------------------------------------------


def test_defaults_documented_validated_and_enough_for_the_gpu_node_profile():
    defaults = yaml_file(ROLE / "defaults" / "main.yml")
    specs = yaml_file(ROLE / "meta" / "argument_specs.yml")["argument_specs"]
    options = specs["main"]["options"]
    assert set(defaults) == set(options)
    # tasks_from: validate has no entry point of its own (one task less) or the same one
    assert specs.get("validate", specs["main"]) == specs["main"]
    for name, value in defaults.items():
        assert options[name]["default"] == value, name
        assert name.startswith("ulimits_")
    lines = (ROLE / "defaults" / "main.yml").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("ulimits_"):
            assert lines[index - 1].startswith("# "), f"no comment above {line}"
    conf = {
        item: {
            kind: ulimits_conf_value(defaults[f"ulimits_{item}_{kind}"], "x", item)
            for kind in ("soft", "hard")
        }
        for item in ("nofile", "memlock", "nproc")
    }
    assert ulimits_host_problems(conf, RAW, NR_OPEN, {}, may_raise=True) == []
    minimums = load_profile("gpu-node", profile_schema()).values["checks"]["ulimits"]
    for item in ("nofile", "nproc"):
        for kind in ("soft", "hard"):
            assert ulimits_rlimit(conf[item][kind], item, NR_OPEN) >= minimums[f"min_{item}_{kind}"]
    assert minimums["min_memlock_hard"] == "unlimited"
    assert conf["memlock"] == {"soft": "unlimited", "hard": "unlimited"}
    assert {"*", "root"} <= set(defaults["ulimits_users"])
