"""The shm role on sandbox hosts: size persisted and live, idempotent, never shrinks below use,
and keeps what a hardening role wrote."""

from __future__ import annotations

import pytest

from tests.integration.ansible import COLLECTION_PREFIX, run_playbook
from tests.integration.cases import cases_of, refusal, run_cases

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/shm/*",
    "plugins/*/shm_*",
    "plugins/module_utils/mountinfo.py",
    "plugins/module_utils/sizes.py",
    "tests/integration/playbooks/shm.yml",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/shm.yml"
MiB = 2**20


def shm_state(fleet, host):
    done = fleet.ssh(
        host,
        "echo $(findmnt --fstab -n -o OPTIONS --mountpoint /dev/shm); "
        "df -B1 --output=size,used /dev/shm | tail -1",
    )
    assert done.returncode == 0, done.stderr
    fstab, sizes = done.stdout.split("\n")[:2]
    size, used = sizes.split()
    return [o for o in fstab.strip().split(",") if o], int(size), int(used)


def shm_tasks(run, host) -> list[tuple[str, dict]]:
    """(name, result) of the shm role's tasks the host ran, in order."""
    return [
        (task["task"]["name"].removeprefix(COLLECTION_PREFIX), task["hosts"][host.name])
        for play in run.output["plays"]
        for task in play["tasks"]
        if host.name in task["hosts"]
        and task["task"]["name"].startswith(f"{COLLECTION_PREFIX}shm : ")
        and "Validating arguments against arg spec" not in task["task"]["name"]
    ]


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("shm", hosts=1)


def fstab_inode(fleet, host) -> str:
    return fleet.ssh(host, "stat -c %i /etc/fstab").stdout.strip()


def test_converges_and_second_run_changes_nothing(fleet):
    (host,) = fleet.hosts()
    inode = fstab_inode(fleet, host)
    first = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"})
    assert first.returncode == 0, first.stderr
    assert first.changed(host.name) == 2  # fstab line, remount
    # a new file renamed over the old: a kill or a full disk in the middle leaves a whole fstab
    assert fstab_inode(fleet, host) != inode
    options, size, _ = shm_state(fleet, host)
    assert size == 256 * MiB
    assert {"nosuid", "nodev", f"size={256 * MiB}"} <= set(options)
    second = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"})
    assert second.returncode == 0 and second.changed(host.name) == 0
    # the cheap path: /dev/shm read once to validate, once to verify, nothing else run
    ran = shm_tasks(second, host)
    assert [name for name, _ in ran] == [
        "shm : Validate the variables",
        "shm : Validate the variables",
        "shm : Size /dev/shm",
        "shm : Compare with shm_size",
    ]
    assert ran[1][1]["msg"] == "shm: validated earlier in this run"
    assert ran[2][1]["skipped"] is True
    assert ran[3][1]["msg"] == f"/dev/shm is {256 * MiB} bytes, as fstab says"


def test_percentage_of_ram(fleet):
    (host,) = fleet.hosts()
    run = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "25%"})
    assert run.returncode == 0, run.stderr
    memtotal_kib = int(fleet.ssh(host, "awk '/MemTotal/{print $2}' /proc/meminfo").stdout)
    options, size, _ = shm_state(fleet, host)
    pages = memtotal_kib // 4
    assert size == -(-pages * 25 // 100) * 4096
    assert "size=25%" in options


def test_refuses_to_shrink_below_what_is_used(fleet):
    (host,) = fleet.hosts()
    assert run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"}).returncode == 0
    fleet.ssh(host, "dd if=/dev/zero of=/dev/shm/held bs=1M count=100 status=none")
    try:
        before = shm_state(fleet, host)
        run = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "64m"})
        assert run.returncode != 0
        assert any("shm_size: 64m" in m and "not shrinking" in m for m in run.messages(host.name))
        assert shm_state(fleet, host) == before
    finally:
        fleet.ssh(host, "rm -f /dev/shm/held")


def test_keeps_options_a_hardening_role_wrote_and_restores_the_size(fleet):
    """CIS-style hardening rewrites the fstab line without size=: the next run puts size=
    back, keeps the hardening options, and applies the size live again."""
    (host,) = fleet.hosts()
    assert run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"}).returncode == 0
    fleet.ssh(
        host,
        "sed -i 's|^tmpfs /dev/shm .*|tmpfs /dev/shm tmpfs defaults,nodev,nosuid,noexec 0 0|' "
        "/etc/fstab && mount -o remount,size=64m,noexec /dev/shm",
    )
    verify = run_playbook(
        fleet, "playbooks/verify.yml", extra_vars={"shm_size": "256m"}, tags="shm"
    )
    assert verify.returncode != 0  # verification notices the drift
    (message,) = verify.messages(host.name)
    assert message.startswith(
        "/dev/shm does not match shm_size=256m: fstab has "
        "'tmpfs defaults,nodev,nosuid,noexec', the mount has 'tmpfs 67108864 "
    )
    assert message.endswith(
        f"(wanted {256 * MiB} bytes): the fstab line lacks size={256 * MiB}; the mount is "
        "67108864 bytes"
    )
    run = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"})
    assert run.returncode == 0, run.stderr
    options, size, _ = shm_state(fleet, host)
    assert size == 256 * MiB
    assert {"noexec", "nodev", "nosuid", f"size={256 * MiB}"} <= set(options)
    assert "defaults" not in options
    again = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"})
    assert again.changed(host.name) == 0


def test_every_dev_shm_line_a_hardening_script_appended_is_set(fleet):
    """A second /dev/shm line appended to fstab (mount reads the last): both are set to the
    role's line, the rest of fstab is kept byte for byte, and the next run changes nothing."""
    (host,) = fleet.hosts()
    assert run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "256m"}).returncode == 0
    others = "grep -v ' /dev/shm ' /etc/fstab | md5sum"
    kept = fleet.ssh(host, others).stdout
    fleet.ssh(host, "echo 'tmpfs  /dev/shm/  tmpfs  defaults,noexec  0  0' >> /etc/fstab")
    run = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "128m"})
    assert run.returncode == 0, run.stderr
    lines = fleet.ssh(host, "grep '/dev/shm' /etc/fstab").stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    src, path, fstype, options, dump, passno = lines[0].split(" ")
    assert (src, path, fstype, dump, passno) == ("tmpfs", "/dev/shm", "tmpfs", "0", "0")
    assert set(options.split(",")) == {"noexec", "nosuid", "nodev", f"size={128 * MiB}"}
    assert fleet.ssh(host, others).stdout == kept
    assert shm_state(fleet, host)[1] == 128 * MiB
    again = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "128m"})
    assert again.returncode == 0 and again.changed(host.name) == 0


def test_check_diff_on_a_fresh_host_changes_nothing(make_fleet):
    fresh = make_fleet("shm-check", hosts=1)
    (host,) = fresh.hosts()
    before = shm_state(fresh, host)
    run = run_playbook(fresh, PLAYBOOK, extra_vars={"shm_size": "1g"}, check=True, diff=True)
    assert run.returncode == 0, run.stderr
    assert shm_state(fresh, host) == before
    assert before[1] == 64 * MiB


BAD_INPUT = [
    ({"shm_size": "-1G"}, "shm_size: not a size"),
    ({"shm_size": "0"}, "shm_size: must be larger than zero"),
    ({"shm_size": "12 parsecs"}, "shm_size: not a size"),
    ({"shm_size": "150%"}, "shm_size: a percentage of RAM must be between"),
    ({"shm_size": "64XB"}, "shm_size: not a size"),
    ({"shm_mount_options": ["nosuid", "size=1g"]}, "shm_mount_options:"),
    ({"shm_enabled": "maybe"}, "shm_enabled"),
]


@pytest.fixture(scope="module")
def bad_input_run(fleet):
    """Every bad value in one site.yml run, a case each (tests/integration/cases.py)."""
    (host,) = fleet.hosts()
    before = shm_state(fleet, host)
    run = run_cases(fleet, host, "site.yml", cases_of(BAD_INPUT), common={"shm_size": "256m"})
    return host, before, run


@pytest.mark.parametrize(("index", "message"), [(i, m) for i, (_, m) in enumerate(BAD_INPUT)])
def test_bad_input_fails_before_any_change(fleet, bad_input_run, index, message):
    host, before, run = bad_input_run
    assert message in refusal(run, index)
    assert shm_state(fleet, host) == before


def test_switches_given_as_strings_from_the_command_line_are_booleans(fleet):
    """`-e shm_enabled=true` gives the string 'true', as most people switch a role on."""
    (host,) = fleet.hosts()
    on = {"shm_size": "128m", "shm_enabled": "true", "shm_refuse_shrink_below_used": "yes"}
    run = run_playbook(fleet, PLAYBOOK, extra_vars=on)
    assert run.returncode == 0, run.stderr + str(run.messages(host.name))
    assert shm_state(fleet, host)[1] == 128 * MiB
    off = run_playbook(fleet, PLAYBOOK, extra_vars={"shm_size": "64m", "shm_enabled": "false"})
    assert off.returncode == 0 and off.changed(host.name) == 0, off.stderr
    assert shm_state(fleet, host)[1] == 128 * MiB
