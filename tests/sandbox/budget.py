"""What sandbox hosts share with this machine, budgeted across every fleet on it: inotify
instances. Each host's systemd, dbus and logind hold inotify instances, counted against root's
fs.inotify.max_user_instances together with every other host's and this machine's own (128 on
a fresh machine of this kind): past it a host's systemd cannot start ("Failed to create control
group inotify object: Too many open files"). Fleets of several pytest workers and checkouts
start their hosts one fleet at a time under a machine-wide lock (held for the spawning only),
each counting the hosts already started (a host's marker is in its first process's
environment, so it counts from then); where the limit cannot hold them all at their peak, it
is raised (root only, never lowered), and where it cannot be raised the start waits for other
fleets to go down, then fails naming the sysctl, rather than one host failing at random.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
# A booted host holds 5 (systemd 3, dbus 1, logind 1); systemctl calls and restarted services
# during a converge take more for a moment: 40 on seven hosts at the peak of site.yml on six.
HOST_PEAK = 8
RESERVE = 32  # this machine's own processes, beside the hosts
LOCK = Path("/run/lock/hostcheck-sandbox-boot.lock")
WAIT_S = 900.0  # where the limit cannot be raised: how long a boot waits for other fleets


class BudgetError(RuntimeError):
    pass


def inotify_instances(pid_namespace_of: int) -> int:
    """inotify instances open in the PID namespace of process `pid_namespace_of` (a host's
    systemd: the host's own)."""
    namespace = os.readlink(f"/proc/{pid_namespace_of}/ns/pid")
    count = 0
    for pid in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if pid.isdigit() and os.readlink(f"/proc/{pid}/ns/pid") == namespace:
                count += instances_of(int(pid))
    return count


def instances_of(pid: int) -> int:
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                count += os.readlink(fd.path) == "anon_inode:inotify"
    return count


def instances_needed(running_hosts: int, new_hosts: int) -> int:
    return (running_hosts + new_hosts) * HOST_PEAK + RESERVE


@contextlib.contextmanager
def booking(running_hosts, new_hosts: int, log=print, wait_s: float = WAIT_S) -> Iterator[None]:
    """Held while a fleet starts its hosts: no other fleet starts any meanwhile, and the limit
    holds the hosts running (running_hosts(), counted under the lock) and the new ones at their
    peak."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        deadline = time.monotonic() + wait_s
        while not ensure_instances(instances_needed(running_hosts(), new_hosts), log):
            if time.monotonic() > deadline:
                needed = instances_needed(running_hosts(), new_hosts)
                raise BudgetError(
                    f"{new_hosts} more sandbox hosts need about {needed} inotify instances "
                    f"with the {running_hosts()} hosts already running, and "
                    f"fs.inotify.max_user_instances is {INSTANCES.read_text().strip()} and "
                    f"cannot be raised here; fewer hosts at once, or as root: "
                    f"sysctl fs.inotify.max_user_instances={_next_power_of_two(needed)}"
                )
            time.sleep(1)  # until fleets of other workers or checkouts go down
        yield


def ensure_instances(needed: int, log=print) -> bool:
    """Whether the limit holds `needed`, raised to the next power of two if it did not."""
    limit = int(INSTANCES.read_text())
    if limit >= needed:
        return True
    raised = _next_power_of_two(needed)
    try:
        INSTANCES.write_text(f"{raised}\n")
    except OSError:
        return False
    log(f"raised fs.inotify.max_user_instances from {limit} to {raised} for the sandbox hosts")
    return True


def _next_power_of_two(number: int) -> int:
    return 1 << (number - 1).bit_length()
