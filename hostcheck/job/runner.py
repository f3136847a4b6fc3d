"""Run a job's command unchanged, with the DataLoader probe in each of its Python processes,
and watch it from outside: CPU time of every process of the job, /dev/shm use, how it
ended. Processes the job leaves behind are stopped before this returns.

hostcheck job makes itself the job's child subreaper (Linux), so workers whose parent died
are re-parented here and can be found and stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from hostcheck.job import gpu_use, host_use

INJECT_DIR = str(Path(__file__).parent / "inject")
SAMPLE_EVERY_S = 0.25
PR_SET_CHILD_SUBREAPER = 36
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass
class JobRun:
    command: list[str]
    outcome: str  # completed | failed | killed | not found | not executable
    exit_status: int | None  # the job's, as a shell shows it: 128+N for a signal
    signal: str | None  # the signal that ended the job
    duration_s: float
    processes: list[dict]  # what each probed process wrote (proc-<pid>.json)
    cpu_seconds: dict[int, float]  # pid -> user+system CPU seconds, last seen
    shm_before_bytes: int | None
    shm_peak_bytes: int | None  # peak /dev/shm use above what it held before the job
    shm_size_bytes: int | None
    forwarded: str | None = None  # a signal hostcheck job received and passed on
    left_behind: list[int] = field(default_factory=list)  # pids stopped after the job ended
    unreadable: list[str] = field(default_factory=list)  # probe files that could not be read
    host_use: dict[int, host_use.ProcessUse] = field(default_factory=dict)  # pid -> what was seen
    gpu: gpu_use.GpuUse | None = None  # NVML sampled while the job ran
    started_at: float | None = None  # time.time() when the command was started

    @classmethod
    def not_started(cls, command: list[str], outcome: str) -> JobRun:
        """A command that could not be started: 127 when not found, else 126, as shells do."""
        status = 127 if outcome == "not found" else 126
        return cls(list(command), outcome, status, None, 0.0, [], {}, None, None, None)

    @property
    def started(self) -> bool:
        return not self.outcome.startswith("not ")


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _environment(folder: str) -> dict:
    env = dict(os.environ)
    paths = [INJECT_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["HOSTCHECK_JOB_DIR"] = folder
    return env


def _shm_used(path: str = "/dev/shm") -> tuple[int, int] | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return usage.used, usage.total


def _resolve(command: list[str]) -> tuple[str | None, str | None]:
    """(executable, problem): a command word found on PATH, or a path that can run."""
    word = command[0]
    if os.sep in word:
        if not os.path.exists(word):
            return None, "not found"
        if os.path.isdir(word) or not os.access(word, os.X_OK):
            return None, "not executable"
        return word, None
    found = shutil.which(word)
    return (found, None) if found else (None, "not found")


class _Watcher:
    """Samples the job's process tree and /dev/shm until stopped."""

    def __init__(self, root: psutil.Process, marker: str) -> None:
        self.root = root
        self.marker = marker
        self.cpu: dict[int, float] = {}
        self.known: dict[int, psutil.Process] = {}
        before = _shm_used()
        self.shm_before = before[0] if before else None
        self.shm_size = before[1] if before else None
        self.shm_peak = 0 if before else None
        self.host_use = host_use.Sampler()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostcheck-job-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.sample()

    def sample(self) -> None:
        for process in _job_processes(self.root, self.marker):
            self.known.setdefault(process.pid, process)
        for pid, process in list(self.known.items()):
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            self.cpu[pid] = times.user + times.system
        self.host_use.sample(self.known)
        used = _shm_used()
        if used and self.shm_before is not None:
            self.shm_peak = max(self.shm_peak or 0, used[0] - self.shm_before)


def _read_probe_files(folder: str) -> tuple[list[dict], list[str]]:
    documents, unreadable = [], []
    for path in sorted(Path(folder).glob("proc-*.json")):
        try:
            documents.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            unreadable.append(f"{path.name}: {exc}")
    return documents, unreadable


def _is_marked(process: psutil.Process, marker: str) -> bool:
    try:
        return process.environ().get("HOSTCHECK_JOB_DIR") == marker
    except psutil.Error:
        return False


def _job_processes(root: psutil.Process, marker: str) -> list[psutil.Process]:
    """The job's processes: the command's process and its descendants, and the job's
    processes whose parent died (re-parented to this process, the subreaper)."""
    found = []
    with contextlib.suppress(psutil.Error):
        if root.is_running():
            found = [root, *root.children(recursive=True)]
    with contextlib.suppress(psutil.Error):
        for orphan in psutil.Process().children():
            if orphan.pid != root.pid and _is_marked(orphan, marker):
                found += [orphan, *orphan.children(recursive=True)]
    return found


def _stop_left_behind(marker: str, grace_s: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process of the job still running; reap them. A job's
    process is one that carries this run's HOSTCHECK_JOB_DIR in its environment."""
    left = []
    for process in psutil.process_iter():
        if process.pid != os.getpid() and _is_marked(process, marker):
            left.append(process)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(left, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return sorted(p.pid for p in left)


def _shares_terminal_group() -> bool:
    """True when a terminal's Ctrl-C reaches the job by itself (same foreground group)."""
    for stream in (0, 1, 2):
        with contextlib.suppress(OSError):
            return os.tcgetpgrp(stream) == os.getpgrp()
    return False


def run(command: list[str], stop_grace_s: float = 10.0) -> JobRun:
    began = time.monotonic()
    executable, problem = _resolve(command)
    if executable is None:
        return JobRun.not_started(command, problem or "not found")
    folder = tempfile.mkdtemp(prefix="hostcheck-job-")
    _become_subreaper()
    received: list[tuple[int, float]] = []
    try:
        started_at = time.time()
        try:
            child = subprocess.Popen([executable, *command[1:]], env=_environment(folder))
        except OSError as exc:
            return JobRun.not_started(command, f"not executable: {exc.strerror}")
        watcher = _Watcher(psutil.Process(child.pid), folder)
        watcher.start()
        gpus = gpu_use.Sampler(os.environ.get("CUDA_VISIBLE_DEVICES"))
        gpus.start()
        previous = {}

        def forward(signum, frame) -> None:
            received.append((signum, time.monotonic()))
            if signum == signal.SIGINT and _shares_terminal_group():
                return  # the terminal sent it to the job as well
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

        if threading.current_thread() is threading.main_thread():
            for signum in FORWARDED:
                previous[signum] = signal.signal(signum, forward)
        try:
            while True:
                try:
                    code = child.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if received and time.monotonic() - received[0][1] > stop_grace_s:
                        child.kill()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        watcher.stop()
        gpu = gpus.stop(watcher.known)
        left_behind = _stop_left_behind(folder)
        processes, unreadable = _read_probe_files(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ended_by = signal.Signals(-code).name if code < 0 else None
    status = 128 - code if code < 0 else code
    outcome = "completed" if code == 0 else ("killed" if code < 0 else "failed")
    return JobRun(
        command=list(command),
        outcome=outcome,
        exit_status=status,
        signal=ended_by,
        duration_s=time.monotonic() - began,
        processes=processes,
        cpu_seconds=dict(watcher.cpu),
        shm_before_bytes=watcher.shm_before,
        shm_peak_bytes=watcher.shm_peak,
        shm_size_bytes=watcher.shm_size,
        forwarded=signal.Signals(received[0][0]).name if received else None,
        left_behind=left_behind,
        unreadable=unreadable,
        host_use=watcher.host_use.processes,
        gpu=gpu,
        started_at=started_at,
    )
