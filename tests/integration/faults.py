"""Faults injected into a running converge on a sandbox host: the controller killed (SIGKILL, as
a CI job's timeout or a lost session does; SIGINT, as Ctrl-C does), and the host's power cut,
at a chosen moment (a line of Ansible's output, a test on the host, a file a package manager
writes)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from tests.integration.ansible import CHECKOUT_CONTROLLER, playbook_argv, run_playbook
from tests.sandbox.fakegpu import FAULT_HOLD

Fault = Callable[[subprocess.Popen], None]

# Run on the host by its python3: once `written` exists, stop the process holding the write lock
# on `lock` (the package database's) and its children where they are, and write which it was
# to `marker`. Python looks every half millisecond without starting a process each time.
_STOP_THE_LOCK_HOLDER = r"""
import os, signal, subprocess, sys, time
lock, written, marker, hold = sys.argv[1:]
inode = os.stat(lock).st_ino
looked = 0
while not os.path.exists(written):
    looked += 1
    time.sleep(0.0005)
holder = None
with open("/proc/locks") as locks:
    for line in locks:
        fields = line.split()
        if fields[1] != "->" and fields[3] == "WRITE" and fields[5].endswith(f":{inode}"):
            holder = int(fields[4])
            break
if holder:
    os.kill(holder, signal.SIGSTOP)
    subprocess.run(["pkill", "-STOP", "-P", str(holder)], check=False)
    with open(f"/proc/{holder}/comm") as comm:
        said = f"{holder} {comm.read().strip()}"
else:
    with open("/proc/locks") as locks:
        said = f"none (looked {looked} times; locks: {locks.read()!r})"
with open(marker + ".new", "w") as out:
    out.write(said)
os.rename(marker + ".new", marker)
try:
    os.unlink(hold)
except FileNotFoundError:
    pass
"""
# on the disk, not in /run: read after the host is booted again
_MARKER = "/var/tmp/hostcheck-fault-frozen"
_WATCHER = "/var/tmp/hostcheck-fault-watch.py"


def interrupted_run(
    fleet,
    host,
    fault: Fault,
    *,
    playbook: str = "site.yml",
    extra_vars: dict | None = None,
    tags: str | None = None,
    limit: str | None = None,
    on_host: str = "",
    on_line: str = "",
    wait: float = 900,
) -> list[str]:
    """Start ansible-playbook and, the moment `on_host` (a shell test on the host) succeeds or
    a line of its output contains `on_line`, call fault(process): the controller's end or the
    host's. Returns the output's lines up to then; fails the test when the run ended before
    the moment came."""
    argv = playbook_argv(fleet, playbook, extra_vars, limit=limit, tags=tags)
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,  # a pytest-xdist worker's is non-blocking: Ansible refuses it
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=CHECKOUT_CONTROLLER.environment(
            ANSIBLE_FORCE_COLOR="0", ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3"
        ),
        cwd=CHECKOUT_CONTROLLER.cwd,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    watcher = host_watch(fleet, host, on_host, wait) if on_host else None
    deadline = time.monotonic() + wait
    try:
        while True:
            if on_line and any(on_line in line for line in lines):
                break
            if watcher is not None and watcher.poll() == 0:
                break
            assert process.poll() is None, "the run ended first:\n" + "".join(lines[-40:])
            assert time.monotonic() < deadline, "the moment never came:\n" + "".join(lines[-40:])
            time.sleep(0.05)
        seen = list(lines)
        fault(process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=120)
        reader.join(timeout=30)
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        if watcher is not None:
            watcher.wait(timeout=30)
    return seen


def host_watch(fleet, host, test: str, wait: float) -> subprocess.Popen:
    """One SSH session that repeats a shell test on the host every 0.1 s and exits 0 once it
    succeeds (non-zero after `wait` seconds, or when the host goes): a login per test was 0.3
    CPU-seconds, five a second for the whole wait."""
    loop = f"until {test}; do sleep 0.1; done"
    return subprocess.Popen(
        fleet.ssh_argv(host, f"timeout {int(wait)} sh -c {shlex.quote(loop)} >/dev/null 2>&1"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def converges_then_changes_nothing(fleet, host, playbook: str = "site.yml", **options) -> None:
    """After a fault: the next run (run_playbook's options) must succeed and the one after it
    change nothing on the host."""
    second = run_playbook(fleet, playbook, **options)
    assert second.returncode == 0, second.failure_text(host.name)
    third = run_playbook(fleet, playbook, **options)
    assert third.returncode == 0, third.failure_text(host.name)
    assert third.changed(host.name) == 0, third.changed_tasks(host.name)


def signal_controller(sig: int) -> Fault:
    """The controller's end: `sig` to ansible-playbook's whole process group, its ssh
    connections included (SIGINT: Ctrl-C in a terminal; SIGKILL: a CI job's timeout)."""

    def fault(process):
        os.killpg(process.pid, sig)
        process.wait(timeout=120)

    return fault


def power_cut(fleet, host) -> Fault:
    """The host's end: every process of the host SIGKILLed at once (Fleet.stop)."""
    return lambda process: fleet.stop(host)


def freeze_when_written(fleet, host, lock: str, written: str) -> str:
    """Start a watcher on the host that freezes the holder of the package database's write lock
    (`lock`: /var/lib/dpkg/lock, /var/lib/rpm/.rpm.lock) and its children the moment `written`,
    a file one of the packages installs, exists: a transaction held in its middle, for a
    power cut there (tiny packages install in milliseconds, faster than a test over SSH can
    look). Until then the stand-in driver packages wait in their post-install script
    (tests/sandbox/fakegpu.py, FAULT_HOLD names the watcher), so the rest of the transaction
    cannot finish before a loaded machine gets round to the watcher. Returns a test for the
    host that succeeds once it has; then frozen(fleet, host) says which process it froze."""
    started = fleet.ssh(
        host,
        f"rm -f {_MARKER}; cat > {_WATCHER} <<'EOF'\n{_STOP_THE_LOCK_HOLDER}EOF\n"
        f"setsid timeout 900 python3 {_WATCHER} {lock} {written} {_MARKER} {FAULT_HOLD}"
        f" </dev/null >/dev/null 2>&1 & echo $! > {FAULT_HOLD}",
    )
    assert started.returncode == 0, started.stderr
    return f"test -e {_MARKER}"


def frozen(fleet, host) -> str:
    """What freeze_when_written froze: "pid name", or "none ..." when nothing held the lock."""
    return fleet.ssh(host, f"cat {_MARKER}").stdout.strip()
