"""The DataLoader probe `hostcheck job` puts into each process of a job (standard library
only: the job's Python may not have hostcheck).

When torch.utils.data.dataloader is imported, its iterator's `__next__` is wrapped: the
time spent inside it is the data-wait, the time from one call to the next on the same
iterator is the step. Each epoch's first batch is start-up, the others are steady; each
steady batch's wait is kept (_Waits: bounded, for hostcheck/job/waits.py). What a
process measured goes to <HOSTCHECK_JOB_DIR>/proc-<pid>.json (written whole, then renamed),
at most once a second while batches flow, at the end of each epoch, when the iterator
raises, and at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import importlib.abc
import importlib.machinery
import json
import math
import os
import sys
import time

MODULE = "torch.utils.data.dataloader"
FLUSH_EVERY_S = 1.0

_state: dict = {"folder": None, "loaders": [], "last_flush": 0.0, "started": time.time()}
# perf_counter() + this = time.time(): the waits' times are written as wall-clock times
_WALL_MINUS_PERF = time.time() - time.perf_counter()


class _Waits:
    """Every steady batch's wait, in bounded memory: the first EXACT waits as integer
    microseconds, then all of them as counts in log-spaced bins (BINS_PER_DECADE a decade
    from LOWEST_S: a percentile read from them is within 3 %); and always the WORST waits
    with when they began (perf_counter), their iteration and batch in it."""

    EXACT = 4096
    WORST = 32
    LOWEST_S = 1e-6
    LOG10_LOWEST = -6
    BINS_PER_DECADE = 40
    BINS = 9 * BINS_PER_DECADE  # 1 us to 1000 s

    __slots__ = ("bins", "count", "exact", "worst")

    def __init__(self) -> None:
        self.count = 0
        self.exact: list | None = []
        self.bins: list | None = None
        self.worst: list = []  # a heap of (wait, began, iteration, batch)

    def _bin(self, wait: float) -> int:
        if wait <= self.LOWEST_S:
            return 0
        index = int((math.log10(wait) - self.LOG10_LOWEST) * self.BINS_PER_DECADE)
        return index if index < self.BINS else self.BINS - 1

    def add(self, wait: float, began: float, iteration: int, batch: int) -> None:
        self.count += 1
        if self.exact is not None:
            self.exact.append(int(wait * 1e6))
            if len(self.exact) >= self.EXACT:
                self.bins = [0] * self.BINS
                for micros in self.exact:
                    self.bins[self._bin(micros / 1e6)] += 1
                self.exact = None
        else:
            self.bins[self._bin(wait)] += 1
        if len(self.worst) < self.WORST:
            heapq.heappush(self.worst, (wait, began, iteration, batch))
        elif wait > self.worst[0][0]:
            heapq.heapreplace(self.worst, (wait, began, iteration, batch))

    def to_dict(self) -> dict:
        return {
            "count": self.count,
            "exact_us": self.exact,
            "bins": None
            if self.bins is None
            else {
                "lowest_s": self.LOWEST_S,
                "per_decade": self.BINS_PER_DECADE,
                "counts": self.bins,
            },
            "worst": [
                {
                    "wait_s": round(wait, 6),
                    "at": round(began + _WALL_MINUS_PERF, 4),
                    "iteration": iteration,
                    "batch": batch,
                }
                for wait, began, iteration, batch in sorted(self.worst, reverse=True)
            ],
        }


class _Windows:
    """The steady batches' samples and step seconds in windows of about WINDOW_S of step
    time each, for the throughput's noise (hostcheck/job/compare.py): at most MOST windows;
    when full, neighbours merge in pairs and windows become twice as long."""

    WINDOW_S = 1.0
    MOST = 256

    __slots__ = ("closed", "length_s", "samples", "step_s")

    def __init__(self) -> None:
        self.length_s = self.WINDOW_S
        self.closed: list = []  # [samples, step seconds]
        self.samples = 0
        self.step_s = 0.0

    def add(self, samples: int, step: float) -> None:
        self.samples += samples
        self.step_s += step
        if self.step_s >= self.length_s:
            self.closed.append([self.samples, self.step_s])
            self.samples, self.step_s = 0, 0.0
            if len(self.closed) >= self.MOST:
                pairs = zip(self.closed[0::2], self.closed[1::2])
                self.closed = [[a[0] + b[0], a[1] + b[1]] for a, b in pairs]
                self.length_s *= 2

    def to_dict(self) -> dict:
        windows = [[samples, round(step, 6)] for samples, step in self.closed]
        if self.step_s >= self.length_s / 2:  # the running window, when long enough to count
            windows.append([self.samples, round(self.step_s, 6)])
        return {"window_s": self.length_s, "windows": windows}


class _Loader:
    """What one DataLoader did, over all its iterations."""

    __slots__ = (
        "batches",
        "created_at",
        "data_wait_s",
        "failure",
        "first_iter_at",
        "first_pending",
        "first_steady_at",
        "index",
        "iteration_start",
        "iterations",
        "last_batch_at",
        "open_batch",
        "open_samples",
        "open_start",
        "open_wait",
        "pin_effective",
        "pinned_batches",
        "samples",
        "settings",
        "startup_s",
        "steady_batches",
        "steady_samples",
        "step_s",
        "throughput",
        "waits",
        "worker_cpu_s",
        "worker_io",
        "worker_pids",
    )

    def __init__(self, index: int, created_at: str, settings: dict) -> None:
        self.index = index
        self.created_at = created_at
        self.settings = settings
        self.pin_effective = None
        self.iterations = 0
        self.batches = 0
        self.samples = 0
        self.steady_batches = 0
        self.steady_samples = 0
        self.data_wait_s = 0.0
        self.step_s = 0.0
        self.startup_s = 0.0
        self.first_iter_at = None
        self.first_steady_at = None  # wall-clock start of the first steady batch's step
        self.last_batch_at = None
        self.worker_pids: list = []
        self.worker_cpu_s: dict = {}
        self.worker_io: dict = {}
        self.failure = None
        self.pinned_batches = None
        self.first_pending = False
        self.open_start = None  # the steady batch whose step is still running
        self.open_wait = 0.0
        self.open_samples = 0
        self.open_batch = 0
        self.iteration_start = 0  # batches before this iteration
        self.waits = _Waits()
        self.throughput = _Windows()

    def begin_iteration(self) -> None:
        self.iterations += 1
        self.iteration_start = self.batches
        self.first_pending = True
        self.open_start = None
        if self.first_iter_at is None:
            self.first_iter_at = time.time()

    def close_open(self, now: float) -> None:
        """The previous steady batch's step ended when the next call began."""
        if self.open_start is not None:
            self.steady_batches += 1
            self.steady_samples += self.open_samples
            self.data_wait_s += self.open_wait
            self.step_s += now - self.open_start
            self.throughput.add(self.open_samples, now - self.open_start)
            batch = self.open_batch - self.iteration_start
            self.waits.add(self.open_wait, self.open_start, self.iterations, batch)
            self.open_start = None

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "created_at": self.created_at,
            "settings": self.settings,
            "pin_effective": self.pin_effective,
            "iterations": self.iterations,
            "batches": self.batches,
            "samples": self.samples,
            "steady_batches": self.steady_batches,
            "steady_samples": self.steady_samples,
            "data_wait_s": self.data_wait_s,
            "step_s": self.step_s,
            "startup_s": self.startup_s,
            "first_iter_at": self.first_iter_at,
            "first_steady_at": self.first_steady_at,
            "last_batch_at": self.last_batch_at,
            "worker_pids": self.worker_pids,
            "worker_cpu_s": self.worker_cpu_s,
            "worker_io": self.worker_io,
            "failure": self.failure,
            "pinned_batches": self.pinned_batches,
            "waits": self.waits.to_dict(),
            "throughput": self.throughput.to_dict(),
        }


def _env_int(name: str):
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def flush() -> None:
    folder = _state["folder"]
    if folder is None or not _state["loaders"]:
        return
    _state["last_flush"] = time.perf_counter()
    document = {
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "rank": _env_int("RANK"),
        "local_rank": _env_int("LOCAL_RANK"),
        "world_size": _env_int("WORLD_SIZE"),
        "local_world_size": _env_int("LOCAL_WORLD_SIZE"),
        "started": _state["started"],
        "updated": time.time(),
        "loaders": [loader.to_dict() for loader in _state["loaders"]],
    }
    final = os.path.join(folder, f"proc-{os.getpid()}.json")
    partial = final + ".partial"
    try:
        with open(partial, "w") as stream:
            json.dump(document, stream)
        os.replace(partial, final)
    except OSError:
        pass  # the job goes on; the report says what is missing


def _one_line(exc: BaseException) -> str:
    """The error's first line, and its last when it carries a worker's traceback (the
    worker's own error is there)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = type(exc).__name__ + (f": {lines[0]}" if lines else "")
    if len(lines) > 1:
        text += f" ... {lines[-1]}"
    return text


def _caller_site() -> str:
    """file:line of the first frame outside torch and this probe."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if f"{os.sep}torch{os.sep}" not in name and not name.endswith("_hostcheck_job_probe.py"):
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _first_tensor(batch):
    """The batch's first tensor (anything with a shape), looking into lists, tuples and
    dicts; None when there is none."""
    for _ in range(4):
        if getattr(batch, "shape", None) is not None:
            return batch
        if isinstance(batch, (list, tuple)) and batch:
            batch = batch[0]
        elif isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        else:
            return None
    return None


def _batch_length(batch, default):
    """Samples in a batch: the first dimension of its first tensor."""
    tensor = _first_tensor(batch)
    return int(tensor.shape[0]) if tensor is not None and len(tensor.shape) else default


def _cpu_seconds(pid: int):
    """User plus system CPU seconds of a process, from /proc (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            fields = stream.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception:  # gone, or the interpreter is shutting down
        return None


def _read_io(pid: int):
    """[rchar, read_bytes or None] of a process, from /proc (None when unreadable or gone)."""
    try:
        with open(f"/proc/{pid}/io") as stream:
            fields = dict(line.split(": ", 1) for line in stream.read().splitlines())
        storage = fields.get("read_bytes")
        return [int(fields["rchar"]), int(storage) if storage is not None else None]
    except Exception:  # gone, or the interpreter is shutting down
        return None


def _worker_deaths(iterator, exc: BaseException) -> str:
    """' (worker pid N killed by SIGBUS)' for workers a signal ended: PyTorch's message
    does not always say which signal."""
    import signal

    # A dying worker's end of the connection closes before the kernel reports its exit:
    # after a reset or EOF, give the workers a moment to be seen dead.
    ended_connection = isinstance(exc, (ConnectionError, EOFError))
    deadline = time.monotonic() + (1.0 if ended_connection else 0.0)
    deaths = []
    for worker in getattr(iterator, "_workers", ()):
        code = getattr(worker, "exitcode", None)
        if code is None and ended_connection:
            # not a child of this process, or already closed: nothing to wait for
            with contextlib.suppress(Exception):
                worker.join(max(0.0, deadline - time.monotonic()))
            code = getattr(worker, "exitcode", None)
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            deaths.append(f"worker pid {worker.pid} killed by {name}")
    return f" ({'; '.join(deaths)})" if deaths else ""


def _patch(module) -> None:
    data_loader = module.DataLoader
    base = module._BaseDataLoaderIter
    multi = module._MultiProcessingDataLoaderIter
    original_init = data_loader.__init__
    original_iter = data_loader.__iter__
    original_next = base.__next__
    original_shutdown = multi._shutdown_workers

    def _shutdown_workers(self):
        """The workers' CPU time, read while they still exist."""
        loader = self.__dict__.get("_hostcheck_probe")
        if loader is not None and not getattr(self, "_shutdown", True) and not sys.is_finalizing():
            for worker in getattr(self, "_workers", ()):
                seconds = _cpu_seconds(worker.pid) if worker.pid else None
                if seconds is not None:
                    loader.worker_cpu_s[str(worker.pid)] = seconds
                    if worker.pid not in loader.worker_pids:
                        loader.worker_pids.append(worker.pid)
                reads = _read_io(worker.pid) if worker.pid else None
                if reads is not None:
                    loader.worker_io[str(worker.pid)] = reads
        return original_shutdown(self)

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        settings = {
            "num_workers": self.num_workers,
            "pin_memory": bool(self.pin_memory),
            "prefetch_factor": self.prefetch_factor if self.num_workers else None,
            "persistent_workers": bool(self.persistent_workers),
            "batch_size": self.batch_size,
        }
        loader = _Loader(len(_state["loaders"]) + 1, _caller_site(), settings)
        _state["loaders"].append(loader)
        object.__setattr__(self, "_hostcheck_probe", loader)
        flush()

    def __iter__(self):
        iterator = original_iter(self)
        loader = self.__dict__.get("_hostcheck_probe")
        if loader is not None:
            loader.begin_iteration()
            loader.pin_effective = bool(getattr(iterator, "_pin_memory", False))
            iterator.__dict__["_hostcheck_probe"] = loader
        return iterator

    def __next__(self):
        loader = self.__dict__.get("_hostcheck_probe")
        if loader is None:
            return original_next(self)
        began = time.perf_counter()
        loader.close_open(began)
        try:
            batch = original_next(self)
        except StopIteration:
            flush()
            raise
        except BaseException as exc:
            loader.failure = _one_line(exc) + _worker_deaths(self, exc)
            flush()
            raise
        ended = time.perf_counter()
        samples = _batch_length(batch, loader.settings["batch_size"] or 1)
        loader.batches += 1
        loader.samples += samples
        loader.last_batch_at = time.time()
        if loader.first_pending:
            loader.first_pending = False
            loader.startup_s += ended - began
            workers = getattr(self, "_workers", None)
            if workers:
                pids = [w.pid for w in workers if w.pid]
                loader.worker_pids = sorted(set(loader.worker_pids) | set(pids))
            if loader.pinned_batches is None and loader.pin_effective:
                tensor = _first_tensor(batch)
                pinned = getattr(tensor, "is_pinned", None)
                loader.pinned_batches = bool(pinned()) if pinned is not None else None
        else:
            if loader.first_steady_at is None:
                loader.first_steady_at = time.time() - (time.perf_counter() - began)
            loader.open_start = began
            loader.open_wait = ended - began
            loader.open_samples = samples
            loader.open_batch = loader.batches
        if ended - _state["last_flush"] > FLUSH_EVERY_S:
            flush()
        return batch

    data_loader.__init__ = __init__
    data_loader.__iter__ = __iter__
    base.__next__ = __next__
    multi._shutdown_workers = _shutdown_workers


class _Finder(importlib.abc.MetaPathFinder):
    """Patches torch.utils.data.dataloader right after it is executed."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install(folder: str) -> None:
    _state["folder"] = folder
    sys.meta_path.insert(0, _Finder())
    atexit.register(flush)
