"""The sandbox hosts are real and separate: what happens on one stays there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.ansible import run_module
from tests.integration.conftest import sandbox_unavailable
from tests.sandbox import budget
from tests.sandbox.fleet import CHECKOUT, Fleet, _marked_processes, address_prefix, running_hosts

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = ("tests/sandbox/*",)

pytestmark = pytest.mark.integration
MiB = 2**20


def out(fleet, host, command):
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stderr}"
    return done.stdout.strip()


def test_each_host_has_its_own_name_shm_mounts_and_processes(fleet, hosts):
    seen = {}
    for host in hosts:
        seen[host.name] = {
            "hostname": out(fleet, host, "hostname"),
            "shm": int(out(fleet, host, "df -B1 --output=size /dev/shm | tail -1")),
            "root": out(fleet, host, "findmnt -n -o SOURCE,FSTYPE,OPTIONS /"),
            "pid1": out(fleet, host, "ps -o comm= -p 1"),
            "processes": int(out(fleet, host, "ps -e --no-headers | wc -l")),
        }
    for host in hosts:
        mine = seen[host.name]
        assert mine["hostname"] == host.name
        assert mine["shm"] == 64 * MiB
        assert mine["root"].startswith(f"/overlay/{host.name} overlay")
        assert f"{host.folder}/upper" in mine["root"]
        assert mine["pid1"] == "systemd"
        assert mine["processes"] < 40  # its own PID namespace, not this machine's
    assert len({s["root"] for s in seen.values()}) == len(hosts)


def test_a_change_on_one_host_is_seen_nowhere_else(fleet, hosts):
    first, second = hosts[0], hosts[1]
    out(fleet, first, "echo changed > /etc/sandbox-isolation-probe")
    out(fleet, first, "mount -o remount,size=128m /dev/shm")
    try:
        assert out(fleet, first, "cat /etc/sandbox-isolation-probe") == "changed"
        assert fleet.ssh(second, "test -e /etc/sandbox-isolation-probe").returncode == 1
        assert not Path("/etc/sandbox-isolation-probe").exists()
        assert int(out(fleet, first, "df -B1 --output=size /dev/shm | tail -1")) == 128 * MiB
        assert int(out(fleet, second, "df -B1 --output=size /dev/shm | tail -1")) == 64 * MiB
        assert os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize > 128 * MiB
    finally:
        out(fleet, first, "rm -f /etc/sandbox-isolation-probe; mount -o remount,size=64m /dev/shm")


def test_fresh_ssh_sessions_follow_the_hosts_limits_d(fleet, hosts):
    first, second = hosts[0], hosts[1]
    before = out(fleet, second, "ulimit -Sn; ulimit -Hn; ulimit -Sl; ulimit -Hl").split()
    # inside this machine's caps: open files 20000, locked memory 8 MiB
    out(
        fleet,
        first,
        "printf 'root soft nofile 4096\\nroot hard nofile 8192\\n"
        "root soft memlock 2048\\nroot hard memlock 4096\\n' "
        "> /etc/security/limits.d/50-sandbox-test.conf",
    )
    try:
        after = out(fleet, first, "ulimit -Sn; ulimit -Hn; ulimit -Sl; ulimit -Hl").split()
        assert after == ["4096", "8192", "2048", "4096"]
        assert (
            out(fleet, second, "ulimit -Sn; ulimit -Hn; ulimit -Sl; ulimit -Hl").split() == before
        )
    finally:
        out(fleet, first, "rm -f /etc/security/limits.d/50-sandbox-test.conf")


def test_ansible_reaches_every_host_and_sees_a_real_root_mount(fleet, hosts):
    results = run_module(fleet, "ansible.builtin.setup", "filter=ansible_mounts,ansible_hostname")
    assert set(results) == {h.name for h in hosts}
    for name, result in results.items():
        facts = result["ansible_facts"]
        assert facts["ansible_hostname"] == name
        mounts = {m["mount"]: m for m in facts["ansible_mounts"]}
        assert mounts["/"]["fstype"] == "overlay"
        assert "/dev/shm" not in mounts or mounts["/dev/shm"]["fstype"] == "tmpfs"


def test_pip_and_apt_use_this_machines_sources(fleet, hosts):
    host = hosts[2]
    report = out(
        fleet,
        host,
        "python3 -m venv /tmp/pipcheck && /tmp/pipcheck/bin/pip install --quiet --dry-run "
        "--no-deps --ignore-installed --report - torch==2.13.0",
    )
    (item,) = json.loads(report)["install"]
    assert item["metadata"]["version"].startswith("2.13.0")
    assert item["download_info"]["url"].startswith("file:///opt/wheels/torch-2.13.0")
    assert out(fleet, host, "findmnt -n -o OPTIONS /opt/wheels").startswith("ro,")
    installed = out(
        fleet,
        host,
        "apt-get update -qq >/dev/null && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends hello "
        ">/dev/null && hello",
    )
    assert installed == "Hello, world!"


def _leftovers(folder: Path) -> dict:
    """Everything of a fleet's folder still alive anywhere on this machine."""
    prefix = f"{folder}/"
    processes = [pid for pid, mark in _marked_processes() if mark.startswith(prefix)]
    loops = subprocess.run(
        ["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    mounts = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/mountinfo").read_text()
            except OSError:
                continue
            mounts += [line for line in text.splitlines() if prefix in line]
    return {
        "processes": processes,
        "loops": [line for line in loops.splitlines() if prefix in line],
        "mounts": mounts,
        "folder": folder.exists(),
    }


def test_teardown_after_a_harness_killed_mid_start_leaves_nothing(fleet, hosts):
    """A second fleet (as a second checkout would have) is killed while starting; its own
    teardown removes everything of it and nothing of the fleet beside it."""
    crash = Fleet(instance="crash", log=lambda message: None)
    crash.down(quiet=True)
    harness = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.sandbox", "--instance", "crash"),
            *("up", "--hosts", "3", "--os", "debian12"),
        ],
        cwd=CHECKOUT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = _leftovers(crash.folder)
        if state["processes"] and state["loops"]:
            break
        time.sleep(0.01)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    started = _leftovers(crash.folder)
    assert started["processes"] and started["loops"], "the harness was not caught mid-start"
    assert address_prefix(crash.id) != address_prefix(fleet.id)

    done = subprocess.run(
        [sys.executable, "-m", "tests.sandbox", "--instance", "crash", "down"],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "killed" in done.stdout
    assert _leftovers(crash.folder) == {"processes": [], "loops": [], "mounts": [], "folder": False}
    again = subprocess.run(
        [sys.executable, "-m", "tests.sandbox", "--instance", "crash", "down"],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert again.stdout.strip() == "sandbox down: nothing to do"
    assert all(row["ssh"] for row in fleet.status())  # the fleet beside it is untouched


def test_each_host_holds_fewer_inotify_instances_than_the_budget_books(fleet, hosts):
    """The budget (tests/sandbox/budget.py) books HOST_PEAK instances a host; a booted host
    holds its systemd's, dbus's and logind's (5 on a fresh host), a systemctl call one more
    while it runs."""
    run = fleet.ssh(hosts[0], "systemctl daemon-reload && systemctl restart systemd-logind")
    assert run.returncode == 0, run.stderr
    held = {host.name: budget.inotify_instances(host.init_pid) for host in hosts}
    assert all(3 <= count <= budget.HOST_PEAK for count in held.values()), held
    # every fleet booted through the budget, so the limit holds all running hosts at their peak
    limit = int(budget.INSTANCES.read_text())
    assert limit >= budget.instances_needed(running_hosts(), 0), (limit, running_hosts())


def test_no_mount_of_the_harness_is_visible_on_this_machine(fleet):
    own = Path("/proc/self/mountinfo").read_text()
    assert str(fleet.folder) not in own


@pytest.mark.skipif(sandbox_unavailable() is not None, reason=str(sandbox_unavailable()))
def test_down_removes_the_fleet_and_is_idempotent():
    extra = Fleet(instance="updown", disks_per_host=1, log=lambda message: None)
    try:
        hosts = extra.up(2)
        assert all(row["ssh"] for row in extra.status())
        assert len(_leftovers(extra.folder)["loops"]) == 2
    finally:
        summary = extra.down(quiet=True)
    assert len(summary["loop_devices"]) == 2
    assert _leftovers(extra.folder) == {"processes": [], "loops": [], "mounts": [], "folder": False}
    assert extra.down(quiet=True) == {"processes": [], "loop_devices": [], "removed": []}
    assert hosts[0].address != hosts[1].address
