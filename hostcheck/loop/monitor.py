"""What the loop uses of the host while it runs: /dev/shm, open files, worker CPU.

A thread samples every few milliseconds: the used space of /dev/shm (statvfs; the
DataLoader's segments are unlinked at once but count until the last descriptor closes) and
the open descriptors of the main process and of each worker. Worker CPU time comes from
/proc (psutil) at the start and end of the measured window.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

import psutil

from hostcheck.loop.workers import SHM, WorkerTracker


def shm_used() -> int:
    try:
        stat = os.statvfs(SHM)
    except OSError:
        return 0
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


def _fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


class Monitor:
    def __init__(self, tracker: WorkerTracker, interval_s: float = 0.005) -> None:
        self.tracker = tracker
        self.interval_s = interval_s
        self.shm_baseline = shm_used()
        self.shm_peak = 0  # above the baseline
        self.main_fds_peak = 0
        self.worker_fds_peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostcheck-monitor", daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def sample(self) -> None:
        self.samples += 1
        self.shm_peak = max(self.shm_peak, shm_used() - self.shm_baseline)
        self.main_fds_peak = max(self.main_fds_peak, _fd_count(os.getpid()))
        workers = self.tracker.refresh() if self.samples % 10 == 1 else self.tracker.alive()
        for proc in workers:
            self.worker_fds_peak = max(self.worker_fds_peak, _fd_count(proc.pid))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)


def run_delay(pid: int) -> float | None:
    """Seconds the process's main thread has waited on a run queue for a CPU (schedstat)."""
    try:
        with open(f"/proc/{pid}/schedstat") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class CpuSnapshot:
    at: float
    workers: dict[int, float]  # pid -> user + system seconds
    waits: dict[int, float]  # pid -> seconds waited for a CPU
    main: float


@dataclass
class CpuUse:
    workers: float = 0.0  # cores the workers kept busy
    main: float = 0.0  # cores the main process kept busy
    workers_waiting: float | None = None  # cores' worth of time workers waited for a CPU


def cpu_snapshot(tracker: WorkerTracker) -> CpuSnapshot:
    workers, waits = {}, {}
    for proc in tracker.refresh():
        if tracker.workers and proc.pid not in tracker.workers:
            continue  # multiprocessing's helpers (resource tracker, forkserver)
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            workers[proc.pid] = times.user + times.system
            delay = run_delay(proc.pid)
            if delay is not None:
                waits[proc.pid] = delay
    own = psutil.Process().cpu_times()
    return CpuSnapshot(time.perf_counter(), workers, waits, own.user + own.system)


def cpu_use(start: CpuSnapshot, end: CpuSnapshot) -> CpuUse:
    wall = end.at - start.at
    if wall <= 0:
        return CpuUse()
    used = sum(end.workers[pid] - start.workers[pid] for pid in end.workers if pid in start.workers)
    both = [pid for pid in end.waits if pid in start.waits]
    waited = sum(end.waits[pid] - start.waits[pid] for pid in both) / wall if both else None
    return CpuUse(used / wall, (end.main - start.main) / wall, waited)
