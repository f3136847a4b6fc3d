"""DataLoader worker processes: none outlives hostcheck, and their deaths become verdicts.

Three layers keep workers from outliving hostcheck, whatever happens to it:
1. `die_with_parent`, the loader's worker_init_fn, asks the kernel (prctl PR_SET_PDEATHSIG)
   to SIGKILL the worker when the thread that forked it ends, which covers a SIGKILL of
   hostcheck that no Python code sees; it exits at once if hostcheck is already gone.
2. PyTorch's own watchdog: an idle worker exits when its parent process changes.
3. `WorkerTracker.reap`, in a `finally`, SIGKILLs any worker this loop started that is still
   there after the DataLoader's own shutdown (a hung worker, an exception mid-epoch).

`classify` turns what a failing loader raises into a `Failure`: `/dev/shm` too small (a
worker killed by SIGBUS, or "No space left on device" when PyTorch reserves the segment),
too few open files (EMFILE, "received 0 items of ancdata", a worker feeder thread that could
not dup a descriptor), or a stuck or dead worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import threading
from dataclasses import asdict, dataclass

import psutil

from hostcheck import units
from hostcheck._shared.sizes import format_size

PR_SET_PDEATHSIG = 1
SHM = "/dev/shm"
SHM_FIX = "set shm_size (role shm) and run: ansible-playbook site.yml --tags shm"
NOFILE_FIX = (
    "set ulimits_nofile_soft and ulimits_nofile_hard (role ulimits) and run: "
    "ansible-playbook site.yml --tags ulimits; then start the job from a fresh login"
)


def die_with_parent(parent_pid: int, stderr_fd: int, worker_id: int) -> None:
    """worker_init_fn (bind the first two arguments with functools.partial)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:  # hostcheck died before prctl took effect
        os._exit(1)
    if stderr_fd >= 0:  # worker tracebacks go to the loop's log, not over hostcheck's table
        with contextlib.suppress(OSError):
            os.dup2(stderr_fd, 2)


class StderrPipe:
    """Worker stderr, collected by a thread of the main process (no file is written).

    Workers forked after it exists inherit the write end and `die_with_parent` makes it
    their fd 2: their tracebacks and PyTorch's bus-error message land here, where
    `classify` reads them, instead of over hostcheck's table.
    """

    def __init__(self, limit: int = 64 * 1024) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.limit = limit
        self.buffer = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="hostcheck-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.read_fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.read_fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.buffer += chunk
            if len(self.buffer) > self.limit:  # keep the end: the error is last
                del self.buffer[: len(self.buffer) - self.limit]

    def text(self) -> str:
        return bytes(self.buffer).decode(errors="replace")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.write_fd)
        self._thread.join(timeout=0.5)
        self._stop.set()
        self._thread.join(timeout=0.5)
        with contextlib.suppress(OSError):
            os.close(self.read_fd)


class WorkerTracker:
    """The child processes that appeared while the loop ran: its workers. The loop's thread
    and its monitor's both read and add to them."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.before = {p.pid for p in self._children()}  # not ours: never reaped
        self.seen: dict[int, psutil.Process] = {}
        self._seen_lock = threading.Lock()
        self.workers: set[int] = set()
        self.stderr = StderrPipe()

    def _children(self) -> list[psutil.Process]:
        try:
            return self.me.children(recursive=True)
        except psutil.Error:
            return []

    def _child_pids(self) -> set[int] | None:
        """Direct children from /proc/self/task/*/children (cheap); None when absent."""
        pids: set[int] = set()
        try:
            tasks = os.listdir(f"/proc/{self.me.pid}/task")
        except OSError:
            return None
        for task in tasks:
            try:
                with open(f"/proc/{self.me.pid}/task/{task}/children") as handle:
                    pids.update(int(p) for p in handle.read().split())
            except (OSError, ValueError):
                if task == str(self.me.pid):
                    return None
        return pids

    def refresh(self) -> list[psutil.Process]:
        pids = self._child_pids()
        if pids is None:
            pids = {proc.pid for proc in self._children()}
        with self._seen_lock:
            new = pids - self.before - set(self.seen)
        for pid in new:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                with self._seen_lock:
                    self.seen.setdefault(pid, process)
        return self.alive()

    def alive(self) -> list[psutil.Process]:
        with self._seen_lock:
            seen = list(self.seen.values())
        living = []
        for proc in seen:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    living.append(proc)
            except psutil.Error:
                continue
        return living

    def add_workers(self, processes: object) -> None:
        """The DataLoader's worker processes (multiprocessing.Process objects)."""
        for process in processes or ():
            pid = getattr(process, "pid", None)
            if pid:
                self.workers.add(pid)

    def reap(self, grace_s: float = 2.0) -> list[int]:
        """SIGKILL the workers still there after `grace_s`; the pids it had to kill. Only the
        DataLoader's workers: multiprocessing's own helpers (the resource tracker, a
        forkserver) serve the whole process and end with it. When the workers could not be
        told apart, every process that appeared during the loop counts as one."""
        self.refresh()
        survivors = [p for p in self.alive() if not self.workers or p.pid in self.workers]
        if survivors:
            _gone, survivors = psutil.wait_procs(survivors, timeout=grace_s)
        killed = []
        for proc in survivors:
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.append(proc.pid)
        if survivors:
            psutil.wait_procs(survivors, timeout=grace_s)
        return killed

    def log_text(self) -> str:
        return self.stderr.text()

    def close(self) -> None:
        self.stderr.close()


def nofile_soft() -> int | float:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return units.UNLIMITED if soft == resource.RLIM_INFINITY else soft


def open_files() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def open_files_needed(base: int, workers: int, prefetch_factor: int, tensors: int = 2) -> int:
    """Descriptors the busiest process of the loader holds, about: what it has open already,
    the pipes and queues of each worker (a worker inherits its elders' at fork), and in
    a worker one descriptor per tensor of each batch in flight until the main process takes
    it (PyTorch's file_descriptor sharing). Checked against measured peaks in the tests."""
    if workers == 0:
        return base + 8
    return base + 6 * workers + prefetch_factor * tensors + 8


def shm_needed(workers: int, prefetch_factor: int, batch_bytes: int) -> int:
    """Bytes of batches in flight in /dev/shm: workers x prefetch_factor x batch bytes."""
    return workers * prefetch_factor * batch_bytes


def shm_space() -> tuple[int, int]:
    """(size, free) of /dev/shm in bytes; (0, 0) when it cannot be read."""
    try:
        stat = os.statvfs(SHM)
    except OSError:
        return 0, 0
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


@dataclass
class Failure:
    kind: str  # shm | nofile | timeout | worker
    message: str  # the verdict, one line
    remedy: str
    detail: str = ""  # the error's last line

    def to_dict(self) -> dict:
        return asdict(self)


SHM_SIGNS = (
    "bus error",
    "sigbus",
    "out of shared memory",
    "insufficient shared memory",
    "unable to allocate shared memory",
)
NOFILE_SIGNS = (
    "too many open files",
    "errno 24",
    "received 0 items of ancdata",
    "no usable temporary directory",
)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def classify(
    error: BaseException,
    log: str,
    workers: int,
    prefetch_factor: int,
    batch_bytes: int,
    open_files_peak: int = 0,
    open_files_need: int = 0,
) -> Failure | None:
    """A verdict for what the loader raised, or None when it is not a loader failure."""
    text = f"{type(error).__name__}: {error}\n{log}"
    low = text.lower()
    detail = _last_line(str(error)) or type(error).__name__
    shm_size, shm_free = shm_space()
    if any(sign in low for sign in SHM_SIGNS) or (
        "no space left on device" in low and ("shm" in low or "torch_" in low)
    ):
        need = shm_needed(max(workers, 1), prefetch_factor, batch_bytes)
        needed = (
            f"needed about {format_size(need)}"
            if need
            else f"needed more than the {format_size(shm_free)} free"
        )
        at_least = f" (at least {format_size(need)} per rank)" if need else ""
        return Failure(
            "shm",
            f"shm too small: {needed}, have {format_size(shm_size)} ({format_size(shm_free)} free)",
            f"{SHM_FIX}{at_least}, or lower num_workers or prefetch_factor",
            detail,
        )
    soft = nofile_soft()
    near_limit = soft != units.UNLIMITED and open_files_peak >= soft - 2
    if any(sign in low for sign in NOFILE_SIGNS) or ("timed out" in low and near_limit):
        need = max(open_files_need, open_files_peak + 1)
        return Failure(
            "nofile",
            f"too few open files: needed about {need}, have {units.format_limit(soft)} "
            "(soft nofile limit)",
            f"{NOFILE_FIX} (at least {need}; 65536 is the usual floor)",
            detail,
        )
    if "timed out" in low:
        return Failure(
            "timeout",
            f"a batch took longer than the loop's timeout: {detail}",
            "raise loop.timeout if batches are this slow, or find what blocks the workers",
            detail,
        )
    if "dataloader worker" in low or "exited unexpectedly" in low or "killed by signal" in low:
        return Failure(
            "worker",
            f"a DataLoader worker died: {detail}",
            "see the worker's error in the report's data (worker_log)",
            detail,
        )
    return None
