"""plugins/modules/package_manager_ready.py: real locks held by another process on this
machine (fcntl, as dpkg and rpm hold theirs; a pid file, as dnf keeps its own), read back
from /proc/locks and /proc; and dpkg's status letters of an interrupted install."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import (
    package_manager_ready as module,
)

HOLD = """
import fcntl, sys, time
handle = open(sys.argv[1], "w")
fcntl.lockf(handle, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def held(tmp_path):
    """Start a process holding an fcntl lock on a file for some seconds: (path, process)."""
    started = []

    def hold(name: str, seconds: float):
        path = tmp_path / name
        path.touch()
        process = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(path), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout.readline().strip() == "locked"
        started.append(process)
        return str(path), process

    yield hold
    for process in started:
        process.kill()
        process.wait()


def proc_locks() -> str:
    with open("/proc/locks") as handle:
        return handle.read()


def test_the_holder_of_an_fcntl_lock_is_found_by_its_file(held, tmp_path):
    path, process = held("lock-frontend", 30)
    other = tmp_path / "lock"
    other.touch()
    found = module.lock_holders(proc_locks(), [path, str(other), "/nonexistent"], own_pid=1)
    assert found == [(path, process.pid)]
    assert module.lock_holders(proc_locks(), [path], own_pid=process.pid) == []


def test_a_holder_is_described_by_its_command(held):
    path, process = held("lock-frontend", 30)
    holder = module.describe(path, process.pid)
    assert holder["pid"] == process.pid and holder["lock"] == path
    assert holder["command"].startswith(sys.executable) and path in holder["command"]


def test_a_dnf_pid_file_counts_while_its_process_lives(tmp_path):
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        files = {}
        for name, content in [
            ("alive", alive.pid),
            ("dead", dead.pid),
            ("empty", ""),
            ("junk", "x"),
        ]:
            files[name] = tmp_path / f"{name}.pid"
            files[name].write_text(str(content))
        paths = [str(p) for p in files.values()] + [str(tmp_path / "missing.pid")]
        assert module.pid_file_holders(paths, own_pid=1) == [(str(files["alive"]), alive.pid)]
        assert module.pid_file_holders(paths, own_pid=alive.pid) == []
    finally:
        alive.kill()
        alive.wait()


def test_waiting_ends_when_the_holder_lets_go(held, monkeypatch):
    path, process = held("lock-frontend", 2)
    monkeypatch.setattr(module, "APT_LOCKS", (path,))
    started = time.monotonic()
    waited, seen, left = module.wait_for_locks("apt", timeout=60)
    assert left == []
    assert [(h["lock"], h["pid"]) for h in seen] == [(path, process.pid)]
    assert 0.5 < waited < 30 and time.monotonic() - started < 30


def test_a_lock_held_past_the_timeout_names_its_holder(held, monkeypatch):
    path, process = held("lock", 60)
    monkeypatch.setattr(module, "RPM_LOCKS", (path,))
    monkeypatch.setattr(module, "DNF_PID_FILES", ())
    waited, _, left = module.wait_for_locks("dnf", timeout=1.5)
    assert 1.5 <= waited < 10
    (holder,) = left
    assert holder["pid"] == process.pid
    message = module.still_held_message({**holder, "unit": "dnf-makecache.service"}, "dnf", waited)
    assert message.startswith(f"the dnf lock {path} is still held by process {process.pid} (")
    assert f"of dnf-makecache.service after {waited:.0f} s" in message
    assert "systemctl stop dnf-makecache.service" in message


def test_no_wait_with_a_timeout_of_0(held, monkeypatch):
    path, process = held("lock", 60)
    monkeypatch.setattr(module, "APT_LOCKS", (path,))
    waited, _, left = module.wait_for_locks("apt", timeout=0)
    assert waited < 1 and [h["pid"] for h in left] == [process.pid]


def test_packages_an_interrupted_dpkg_left_are_named():
    status = "\n".join(
        [
            "gcc ii ",
            "libfoo rc ",
            "libbar un ",
            "nvidia-dkms iU ",  # unpacked, not configured: dpkg killed after unpacking
            "libhalf iF ",  # half-configured
            "libH iH ",  # half-installed
            "man-db iW ",  # awaiting triggers
            "libtrig it ",  # triggers pending
            "libre iiR",  # reinstall required
            "held hi ",
        ]
    )
    assert module.half_configured(status) == [
        "nvidia-dkms",
        "libhalf",
        "libH",
        "man-db",
        "libtrig",
        "libre",
    ]


def test_half_installed_and_reinstall_required_packages_are_installed_again():
    status = "gcc ii \nhello iHR\nlibre iiR\nnvidia-dkms iU \nlibH iH \n"
    assert module.needs_reinstall(status) == ["hello", "libre", "libH"]


def test_dpkg_says_why_not_only_which_package():
    output = (
        "dpkg: error processing package nvidia-dkms-570-server-open (--configure):\n"
        " package is in a very bad inconsistent state; you should\n"
        "Errors were encountered while processing:\n"
        " nvidia-dkms-570-server-open\n"
    )
    assert module.dpkg_error(output) == (
        "dpkg: error processing package nvidia-dkms-570-server-open (--configure): "
        "package is in a very bad inconsistent state; you should"
    )
    assert module.dpkg_error("E: something else\n") == "E: something else"
    assert module.dpkg_error("") == ""
