"""The ulimits role on sandbox hosts: limits.d entries through pam_limits, seen by fresh SSH
logins of root and of a new user, idempotent, drift found by verify, '*' not covering root,
and bad values refused before any change.

The sandbox cannot raise hard limits above 20000 open files and 8 MiB locked memory (no
CAP_SYS_RESOURCE), so the values here stay inside that. The hosts boot systemd: a service it
starts after the role gets the limits of the system.conf.d drop-in."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hostcheck._shared import limits_text

from hostcheck import limits as lim
from tests.integration.ansible import run_playbook
from tests.integration.cases import cases_of, refusal, run_cases
from tests.support.os_vars import LOAD_OS_VARS_TASK, READ_FACTS_TASK

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/ulimits/*",
    "plugins/*/ulimits_*",
    "plugins/module_utils/limits_text.py",
    "plugins/module_utils/host_files.py",
    "plugins/module_utils/sizes.py",
    "tests/integration/playbooks/ulimits.yml",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration

PLAYBOOK = "tests/integration/playbooks/ulimits.yml"
LIMITS_FILE = "/etc/security/limits.d/90-hostcheck-training.conf"
DROPIN = "/etc/systemd/system.conf.d/90-hostcheck-training.conf"
USER = "trainer"
VALUES = {
    "ulimits_nofile_soft": 16384,
    "ulimits_nofile_hard": 20000,
    "ulimits_memlock_soft": "8M",  # a size with a unit ...
    "ulimits_memlock_hard": 8192,  # ... and KiB, as limits.conf has it
    "ulimits_nproc_soft": 65536,
    "ulimits_nproc_hard": 65536,
}
# ulimit -Sn -Hn -Sl -Hl -Su -Hu, each asked alone (bash prints one value per call)
WANTED = ["16384", "20000", "8192", "8192", "65536", "65536"]
ULIMITS = "; ".join(f"ulimit -{k}{i}" for i in "nlu" for k in "SH")


def ssh_as(fleet, host, user: str, command: str) -> subprocess.CompletedProcess:
    """A fresh SSH login (no connection sharing), as `user`, running `command` in bash."""
    return subprocess.run(
        [
            "ssh",
            "-i",
            str(fleet.key_file),
            "-o",
            f"UserKnownHostsFile={fleet.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ControlMaster=no",
            "-o",
            "ControlPath=none",
            "-p",
            str(host.port),
            f"{user}@{host.address}",
            f"bash -c {shlex.quote(command)}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def login_limits(fleet, host, user: str) -> list[str]:
    done = ssh_as(fleet, host, user, ULIMITS)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def host_state(fleet, host) -> tuple[str, list[str]]:
    """Our file (or its absence) and the limits fresh logins of root and the user get."""
    done = ssh_as(fleet, host, "root", f"cat {LIMITS_FILE} 2>/dev/null || echo absent; {ULIMITS}")
    assert done.returncode == 0, done.stderr
    return done.stdout, login_limits(fleet, host, USER)


def validation_messages(run, host: str) -> list[str]:
    """What each validation of the run said, in order: the first (provision.yml's) says what
    it found, later ones reuse its result."""
    return [
        task["hosts"][host]["msg"]
        for play in run.output["plays"]
        for task in play["tasks"]
        if task["task"]["name"].endswith("ulimits : Validate the variables")
        and host in task["hosts"]
    ]


@pytest.fixture(scope="module")
def fleet(make_fleet):
    sandbox = make_fleet("ulimits", hosts=1)
    (host,) = sandbox.hosts()
    done = sandbox.ssh(
        host,
        f"useradd -m -s /bin/bash {USER} && install -d -m 700 -o {USER} -g {USER} "
        f"/home/{USER}/.ssh && install -m 600 -o {USER} -g {USER} /root/.ssh/authorized_keys "
        f"/home/{USER}/.ssh/authorized_keys",
    )
    assert done.returncode == 0, done.stderr
    return sandbox


@pytest.fixture(scope="module")
def converged(fleet):
    (host,) = fleet.hosts()
    before = host_state(fleet, host)
    assert before[0].startswith("absent\n1024\n20000\n")  # what sshd hands out
    assert before[1][:2] == ["1024", "20000"]
    run = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert run.returncode == 0, run.stderr
    return run


def test_fresh_ssh_logins_of_root_and_a_new_user_get_the_limits(fleet, converged):
    (host,) = fleet.hosts()
    # the header line (file created), the entries, the system.conf.d folder and drop-in
    assert converged.changed(host.name) == 4
    assert login_limits(fleet, host, "root") == WANTED
    assert login_limits(fleet, host, USER) == WANTED  # through '*'
    text = fleet.ssh(host, f"cat {LIMITS_FILE}; stat -c '%U %G %a' {LIMITS_FILE}").stdout
    assert text.startswith("# Managed by Ansible (role ulimits)")
    assert text.rstrip().endswith("root root 644")
    entries = lim.parse_limits_conf(text, LIMITS_FILE)
    assert {(e.domain, e.type, e.item, e.value) for e in entries} == {
        (d, k, i, v)
        for d in ("*", "root")
        for (k, i), v in zip(
            [(k, i) for i in ("nofile", "memlock", "nproc") for k in ("soft", "hard")], WANTED
        )
    }


def test_a_service_systemd_starts_gets_the_limits_of_the_drop_in(fleet, converged):
    """Services do not log in through PAM: only DefaultLimit* reaches them, read here from
    /proc of a service's own process, started by systemd after the role ran."""
    (host,) = fleet.hosts()
    dropin = fleet.ssh(host, f"cat {DROPIN}").stdout
    assert "DefaultLimitNOFILE=16384:20000" in dropin
    # Type=exec: systemd-run returns once sleep runs. With Type=simple it returned at the fork,
    # and /proc could show the child before it took the unit's limits: PID 1's own (20000:20000
    # here; seen once, with four workers)
    done = fleet.ssh(
        host,
        "systemd-run --quiet --collect --property=Type=exec --unit=limits-probe sleep 120 && "
        "cat /proc/$(systemctl show -p MainPID --value limits-probe)/limits; "
        "grep -H 'open files' /proc/1/limits; systemctl stop limits-probe",
    )
    assert done.returncode == 0, done.stderr
    rows = {
        line[:26].strip(): line[26:].split()[:2]
        for line in done.stdout.splitlines()[1:]
        if line.strip() and not line.startswith("/proc/1/")
    }
    assert rows["Max open files"] == WANTED[0:2], done.stdout
    assert rows["Max locked memory"] == [str(int(v) * 1024) for v in WANTED[2:4]]
    assert rows["Max processes"] == WANTED[4:6]


def test_hostcheck_reads_the_file_as_pam_limits_did(fleet, converged):
    """hostcheck's limits.conf rules, applied to the host's files, attribute every value of
    both users to our file and agree with what the logins got."""
    (host,) = fleet.hosts()
    done = fleet.ssh(
        host,
        "cat /etc/passwd; echo ===; cat /etc/group; echo ===; "
        "for f in /etc/security/limits.conf /etc/security/limits.d/*.conf; do "
        'echo "### $f"; cat "$f"; done',
    )
    passwd, group, files = done.stdout.split("===\n")
    lines = []
    for chunk in files.split("### ")[1:]:
        path, _, text = chunk.partition("\n")
        lines += lim.parse_limits_conf(text, path)
    for name in ("root", USER):
        user = lim.lookup_user(name, passwd, group)
        assert user is not None
        resolution = lim.resolve_limits(lines, user, nr_open=1048576)
        got = [
            resolution.get(i, k).value // (1024 if i == "memlock" else 1)
            for i in ("nofile", "memlock", "nproc")
            for k in ("soft", "hard")
        ]
        assert [str(v) for v in got] == WANTED
        assert {
            resolution.get(i, k).line.path for i in limits_text.ITEMS for k in limits_text.KINDS
        } == {LIMITS_FILE}


def test_second_run_changes_nothing(fleet, converged):
    """And costs the validations, the skipped include of the changing tasks and the verify."""
    (host,) = fleet.hosts()
    again = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert again.returncode == 0, again.stderr
    assert again.changed(host.name) == 0
    ran = [
        (task["task"]["name"].split(" : ", 1)[1], bool(task["hosts"][host.name].get("skipped")))
        for play in again.output["plays"]
        for task in play["tasks"]
        if host.name in task["hosts"]
        and " : " in task["task"]["name"]
        and not task["task"]["name"].split(" : ", 1)[1].startswith("Validating arguments")
    ]
    assert ran == [
        (LOAD_OS_VARS_TASK, False),
        ("Validate the variables", False),
        (READ_FACTS_TASK, True),
        (LOAD_OS_VARS_TASK, False),
        ("Validate the variables", False),
        ("Set the limits of PAM logins and systemd services where they differ", True),
        ("Verify the limits (changes nothing)", False),
    ]
    said = again.task_results("ulimits : Verify the limits (changes nothing)")[host.name]["msg"]
    assert said.startswith(f"{LIMITS_FILE} has the 12 entries wanted; logins of root, nobody ")
    assert "systemd gives new services {'DefaultLimitNOFILE': '20000'" in said


def test_verify_finds_drift_and_the_role_repairs_its_own(fleet, converged):
    (host,) = fleet.hosts()
    fleet.ssh(
        host, f"sed -i 's/^[*]\\tsoft\\tnofile\\t16384$/*\\tsoft\\tnofile\\t4096/' {LIMITS_FILE}"
    )
    assert login_limits(fleet, host, USER)[0] == "4096"
    verify = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES, tags="verify")
    assert verify.returncode != 0
    text = " ".join(verify.messages(host.name))
    assert f"{LIMITS_FILE} does not match ulimits_users and ulimits_*" in text
    assert "missing ['* soft nofile 16384'], not wanted ['* soft nofile 4096']" in text
    repair = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert repair.returncode == 0, repair.stderr
    assert repair.changed(host.name) == 1
    assert login_limits(fleet, host, USER) == WANTED


def test_verify_finds_an_edited_drop_in_and_the_role_repairs_it(fleet, converged):
    """Found by validation's one read of the host: the drop-in is written again and systemd
    re-executed, so the manager hands out the limits again."""
    (host,) = fleet.hosts()
    show = "systemctl show -p DefaultLimitNOFILESoft --value"
    edited = fleet.ssh(
        host,
        f"sed -i 's/^DefaultLimitNOFILE=16384:/DefaultLimitNOFILE=1024:/' {DROPIN} && "
        f"systemctl daemon-reexec && {show}",
    )
    assert edited.stdout.strip() == "1024", edited.stderr
    verify = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES, tags="verify")
    assert verify.returncode != 0
    text = " ".join(verify.messages(host.name))
    assert "systemd does not give services the limits of ulimits_*" in text
    assert "'DefaultLimitNOFILESoft': '1024'" in text
    repair = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert repair.returncode == 0, repair.stderr
    assert [name.split(" : ")[1] for name in repair.changed_tasks(host.name)] == [
        "Write the system.conf.d drop-in"
    ]
    assert fleet.ssh(host, show).stdout.strip() == "16384"


def test_verify_finds_a_stronger_entry_elsewhere(fleet, converged):
    """A later file's root line beats ours: verify's fresh login of root shows it."""
    (host,) = fleet.hosts()
    fleet.ssh(host, "echo 'root hard nproc 4096' > /etc/security/limits.d/95-site.conf")
    try:
        verify = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES, tags="verify")
        assert verify.returncode != 0
        text = " ".join(verify.messages(host.name))
        assert "a login of root does not get the limits of ulimits_*" in text
        assert "nproc hard: has 4096, wanted 65536" in text
    finally:
        fleet.ssh(host, "rm -f /etc/security/limits.d/95-site.conf")
    assert login_limits(fleet, host, "root") == WANTED


def test_missing_pam_limits_in_sshd_fails_before_any_change(fleet, converged):
    (host,) = fleet.hosts()
    fleet.ssh(
        host,
        "cp /etc/pam.d/sshd /root/sshd.pam && "
        "sed -i 's/^session.*pam_limits.so/# &/' /etc/pam.d/sshd",
    )
    try:
        before = fleet.ssh(host, f"cat {LIMITS_FILE}").stdout
        run = run_playbook(fleet, PLAYBOOK, extra_vars={**VALUES, "ulimits_nofile_soft": 8192})
        assert run.returncode != 0
        text = " ".join(run.messages(host.name))
        assert "ulimits_pam_services: the session stack of /etc/pam.d/sshd" in text
        assert "session required pam_limits.so" in text  # the Debian remedy
        assert run.changed(host.name) == 0
        assert fleet.ssh(host, f"cat {LIMITS_FILE}").stdout == before
    finally:
        fleet.ssh(host, "mv /root/sshd.pam /etc/pam.d/sshd")


def test_check_diff_on_a_fresh_host_changes_nothing(make_fleet):
    fresh = make_fleet("ulimits-check", hosts=1)
    (host,) = fresh.hosts()
    before = fresh.ssh(host, f"ls {LIMITS_FILE} 2>&1; {ULIMITS}").stdout
    run = run_playbook(fresh, PLAYBOOK, extra_vars=VALUES, check=True, diff=True)
    assert run.returncode == 0, run.stderr
    # would create the file, write the entries, the system.conf.d folder and drop-in
    assert run.changed(host.name) == 4
    assert fresh.ssh(host, f"ls {LIMITS_FILE} 2>&1; {ULIMITS}").stdout == before
    assert "No such file" in before


BAD_INPUT = [
    ({"ulimits_nofile_soft": -1}, "ulimits_nofile_soft: must not be negative"),
    ({"ulimits_nofile_soft": 0}, "ulimits_nofile_soft: must be larger than zero"),
    ({"ulimits_nofile_soft": 1.5}, "ulimits_nofile_soft: expected a positive whole number"),
    ({"ulimits_nproc_soft": "lots"}, "ulimits_nproc_soft: expected a positive whole number"),
    ({"ulimits_memlock_soft": "8X"}, "ulimits_memlock_soft: not a size: unknown unit"),
    ({"ulimits_memlock_hard": "8MB"}, "ulimits_memlock_hard: 8000000 bytes is not a whole"),
    (
        {"ulimits_nofile_soft": 20000, "ulimits_nofile_hard": 16384},
        "ulimits_nofile_soft: 20000 is above ulimits_nofile_hard: 16384",
    ),
    (
        {"ulimits_memlock_soft": "16M", "ulimits_memlock_hard": 8192},
        "ulimits_memlock_soft: 16M is above ulimits_memlock_hard: 8192",
    ),
    ({"ulimits_nofile_hard": 2000000}, "ulimits_nofile_hard: 2000000 is above fs.nr_open"),
    (
        {"ulimits_memlock_hard": "unlimited"},
        "ulimits_memlock_hard: unlimited is above the hard limit PID 1 has here (8192 KiB)",
    ),
    ({"ulimits_users": []}, "ulimits_users: a non-empty list"),
    ({"ulimits_users": ["*", "bad user"]}, "not a user, @group or '*': ['bad user']"),
    ({"ulimits_enabled": "maybe"}, "ulimits_enabled"),
]


@pytest.fixture(scope="module")
def bad_input_run(fleet, converged):
    """Every bad value in one run, a case each (tests/integration/cases.py)."""
    (host,) = fleet.hosts()
    before = host_state(fleet, host)
    return host, before, run_cases(fleet, host, PLAYBOOK, cases_of(BAD_INPUT), common=VALUES)


@pytest.mark.parametrize(("index", "message"), [(i, m) for i, (_, m) in enumerate(BAD_INPUT)])
def test_bad_input_fails_before_any_change(fleet, bad_input_run, index, message):
    host, before, run = bad_input_run
    assert message in refusal(run, index)
    assert host_state(fleet, host) == before


def test_switched_off_changes_nothing_and_says_so(fleet, converged):
    (host,) = fleet.hosts()
    before = host_state(fleet, host)
    off = {**VALUES, "ulimits_enabled": False, "ulimits_nofile_soft": 1024}
    run = run_playbook(fleet, PLAYBOOK, extra_vars=off)
    assert run.returncode == 0, run.stderr
    assert run.changed(host.name) == 0
    said = validation_messages(run, host.name)
    assert said[0] == "ulimits_enabled is false: limits.d and systemd left as they are"
    assert said[1:] == ["ulimits: validated earlier in this run"]
    verified = run.task_results("ulimits : Verify the limits (changes nothing)")[host.name]
    assert verified["msg"] == "ulimits_enabled is false: not verified"
    assert host_state(fleet, host) == before


def test_star_does_not_cover_root_and_unlisted_entries_go(fleet, converged):
    """Last in the module: it leaves root out."""
    (host,) = fleet.hosts()
    run = run_playbook(fleet, PLAYBOOK, extra_vars={**VALUES, "ulimits_users": ["*"]})
    assert run.returncode == 0, run.stderr
    said = validation_messages(run, host.name)
    assert "pam_limits never applies '*' or @group lines to" in said[0]
    assert said[1:] == ["ulimits: validated earlier in this run"] * (len(said) - 1)
    text = fleet.ssh(host, f"cat {LIMITS_FILE}").stdout
    assert "root" not in text.split("\n", 1)[1]  # root's six lines removed
    assert login_limits(fleet, host, USER) == WANTED
    root = login_limits(fleet, host, "root")
    assert root[:2] == ["1024", "20000"]  # sshd's defaults: '*' lines skip root
