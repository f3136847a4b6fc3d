"""Run one configuration of the loop and measure it.

Epoch 1 is `warm-up + N` steps; only the N steps after the warm-up count (N is sized so
they last about `seconds`, rounded up to a whole number of worker rounds). Each step is
`next batch` (data-wait: the time blocked on it, with `time.perf_counter`) followed by the
compute step; step time = data-wait + compute. Epoch 2 is only started, to time the epoch
start-up (`iter()` to the first batch), and with `startup_both` a small second loader times
it again with `persistent_workers` flipped.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import statistics
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from hostcheck import interrupt
from hostcheck.loop import theory
from hostcheck.loop.dataset import SyntheticSamples, list_files, make_jpeg, measure_cost
from hostcheck.loop.device import CpuDevice, CudaDevice, device_for
from hostcheck.loop.monitor import Monitor, cpu_snapshot, cpu_use
from hostcheck.loop.settings import LoopSettings
from hostcheck.loop.workers import (
    Failure,
    WorkerTracker,
    classify,
    die_with_parent,
    nofile_soft,
    open_files,
    open_files_needed,
    shm_needed,
    shm_space,
)

DTYPES = {"uint8": torch.uint8, "float32": torch.float32}


class CountSampler(Sampler):
    """`count` indices per epoch, cycling over the dataset: the epoch's length is the loop's
    choice, whatever the dataset's."""

    def __init__(self, count: int, size: int) -> None:
        self.count = count
        self.size = max(1, size)

    def __iter__(self) -> Iterator[int]:
        return (i % self.size for i in range(self.count))

    def __len__(self) -> int:
        return self.count


@dataclass
class LoopResult:
    settings: dict
    device: str
    pin_applied: bool = False
    batches: int = 0  # measured steps
    warmup_batches: int = 0
    samples_per_s: float = 0.0
    batches_per_s: float = 0.0
    step_s: float = 0.0  # mean
    step_p95_s: float = 0.0
    compute_s: float = 0.0  # mean
    data_wait_s: float = 0.0  # mean per step
    data_wait_fraction: float = 0.0  # total wait / total step time
    sample_cost_s: float | None = None  # one sample in the main process (median)
    batch_bytes: int = 0
    dataset_files: int = 0  # files under dataset_path the samples are read from
    worker_cpu_cores: float = 0.0  # cores the workers kept busy
    main_cpu_cores: float = 0.0
    worker_cpu_wait_cores: float | None = None  # time workers waited for a CPU, in cores
    worker_cpu_per_sample_s: float | None = None  # worker CPU seconds per sample consumed
    shm_peak_bytes: int = 0  # /dev/shm used above what it held before the loop
    shm_needed_bytes: int = 0  # workers x prefetch_factor x batch bytes
    shm_size_bytes: int = 0
    open_files_peak: int = 0  # busiest process of the loop
    open_files_needed: int = 0  # estimate (workers.open_files_needed)
    nofile_soft: float = 0
    first_startup_s: float | None = None  # epoch 1: iter() to first batch (forks workers)
    startup_s: dict = field(default_factory=dict)  # epoch 2, "persistent"/"not persistent"
    overlap: float | None = None  # CUDA: share of copy time hidden behind steps
    wall_s: float = 0.0
    failure: Failure | None = None
    worker_log: str = ""
    killed_workers: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["failure"] = self.failure.to_dict() if self.failure else None
        return data


def build_dataset(settings: LoopSettings, length: int) -> SyntheticSamples:
    files = list_files(settings.dataset_path) if settings.dataset_path else []
    if settings.dataset_path and not files:
        raise FileNotFoundError(f"no readable files under {settings.dataset_path}")
    jpeg = make_jpeg(*settings.jpeg_size) if settings.sample == "jpeg" else None
    return SyntheticSamples(
        settings.sample,
        length,
        image_size=settings.image_size,
        cost_s=settings.sample_cost_s,
        jpeg=jpeg,
        files=files,
        shape=settings.sample_shape,
        dtype=DTYPES[settings.sample_dtype],
    )


def batch_nbytes(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if isinstance(batch, (list, tuple)):
        return sum(batch_nbytes(item) for item in batch)
    return 0


def plan(settings: LoopSettings, cost_s: float) -> tuple[int, int]:
    """(warm-up steps, measured steps) for about `settings.seconds` of measurement."""
    workers = settings.num_workers
    if cost_s > 0 or settings.step_time > 0:
        period = theory.predict(
            cost_s, settings.batch_size, workers, settings.step_time, settings.prefetcher
        ).step_s
    else:
        period = 1e-3  # nothing modelled: the loop's own overhead
    measured = math.ceil(settings.seconds / max(period, 1e-4))
    measured = min(max(measured, settings.min_batches), settings.max_batches)
    rounds = max(1, workers)  # whole rounds of the workers: no partial round biases the rate
    measured = math.ceil(measured / rounds) * rounds
    warmup = max(settings.warmup_batches, workers + 1)
    return warmup, measured


class Loop:
    """One configuration: a loader, a device, the steps. Use `run()`."""

    def __init__(
        self,
        settings: LoopSettings,
        dataset: Dataset | None = None,
        device: CpuDevice | CudaDevice | None = None,
        on_step: Callable[[int, int], None] | None = None,
    ) -> None:
        self.settings = settings
        self.device = device or device_for(settings.device)
        self.dataset = dataset
        self.on_step = on_step
        self.tracker: WorkerTracker | None = None

    def _loader(self, count: int, persistent: bool) -> DataLoader:
        s = self.settings
        workers = s.num_workers
        kwargs: dict[str, Any] = {}
        if workers > 0:
            fork = s.start_method == "fork"
            log_fd = self.tracker.stderr.write_fd if (self.tracker and fork) else -1
            kwargs = {
                "prefetch_factor": s.prefetch_factor,
                "persistent_workers": persistent,
                "worker_init_fn": functools.partial(
                    die_with_parent, os.getpid() if s.start_method != "forkserver" else 0, log_fd
                ),
                "multiprocessing_context": s.start_method,
                "timeout": s.timeout,
            }
        return DataLoader(
            self.dataset,
            batch_size=s.batch_size,
            sampler=CountSampler(count, len(self.dataset)),
            num_workers=workers,
            pin_memory=s.pin_memory and self.device.can_pin,
            drop_last=True,
            **kwargs,
        )

    def _iterate(self, loader: DataLoader) -> Any:
        """iter(loader), in this thread (the workers' PR_SET_PDEATHSIG is tied to it), and
        the worker processes it started registered for the final reaping."""
        iterator = iter(loader)
        if self.tracker is not None:
            self.tracker.add_workers(getattr(iterator, "_workers", ()))
        return iterator

    def _first_batch_time(self, loader: DataLoader) -> float:
        """Seconds from iter() to the first batch in hand; the epoch is then dropped."""
        interrupt.raise_if_received()
        start = time.perf_counter()
        feeder = self.device.feeder(self._iterate(loader), self.settings.prefetcher)
        try:
            feeder.next()
            return time.perf_counter() - start
        finally:
            feeder.close()

    def _epoch(self, loader: DataLoader, result: LoopResult, warmup: int, measured: int) -> None:
        s = self.settings
        waits: list[float] = []
        steps: list[float] = []
        computes: list[float] = []
        start_cpu = end_cpu = None
        window_start = window_end = 0.0
        total = warmup + measured
        first = time.perf_counter()
        feeder = self.device.feeder(self._iterate(loader), s.prefetcher)
        try:
            for index in range(total):
                interrupt.raise_if_received()
                if index == warmup:
                    start_cpu = cpu_snapshot(self.tracker)
                t0 = time.perf_counter()
                batch = feeder.next()
                t1 = time.perf_counter()
                if index == 0:
                    result.first_startup_s = t1 - first
                    result.batch_bytes = batch_nbytes(batch)
                self.device.step(batch, s.step_time)
                t2 = time.perf_counter()
                del batch
                if index >= warmup:
                    if index == warmup:
                        window_start = t0
                    window_end = t2
                    waits.append(t1 - t0)
                    computes.append(t2 - t1)
                    steps.append(t2 - t0)
                if self.on_step:
                    self.on_step(index + 1, total)
            end_cpu = cpu_snapshot(self.tracker)
            try:  # the end of the epoch: non-persistent workers shut down here
                feeder.next()
                result.notes.append("epoch longer than planned")
            except StopIteration:
                pass
        finally:
            feeder.close()
        wall = window_end - window_start
        result.batches = len(steps)
        result.warmup_batches = warmup
        result.batches_per_s = len(steps) / wall
        result.samples_per_s = len(steps) * s.batch_size / wall
        result.step_s = statistics.fmean(steps)
        result.step_p95_s = sorted(steps)[max(0, math.ceil(0.95 * len(steps)) - 1)]
        result.compute_s = statistics.fmean(computes)
        result.data_wait_s = statistics.fmean(waits)
        result.data_wait_fraction = sum(waits) / sum(steps)
        if start_cpu and end_cpu:
            use = cpu_use(start_cpu, end_cpu)
            result.worker_cpu_cores = use.workers
            result.main_cpu_cores = use.main
            result.worker_cpu_wait_cores = use.workers_waiting
            if s.num_workers and steps:
                result.worker_cpu_per_sample_s = (
                    use.workers * (end_cpu.at - start_cpu.at) / (len(steps) * s.batch_size)
                )

    def run(self) -> LoopResult:
        s = self.settings
        began = time.perf_counter()
        result = LoopResult(settings=asdict(s), device=self.device.describe(), pin_applied=False)
        result.pin_applied = s.pin_memory and self.device.can_pin
        if s.pin_memory and not self.device.can_pin:
            result.notes.append("pin_memory has no effect without CUDA (nothing to pin for)")
        if self.dataset is None:
            self.dataset = build_dataset(s, length=4096)
        result.dataset_files = len(getattr(self.dataset, "files", ()))
        if isinstance(self.dataset, SyntheticSamples) and s.sample == "jpeg":
            result.sample_cost_s = measure_cost(self.dataset, 8)
        else:  # calibrated samples, or a caller's dataset: never run one in this process
            result.sample_cost_s = s.sample_cost_s
        warmup, measured = plan(s, result.sample_cost_s)
        sample_bytes = getattr(self.dataset, "sample_bytes", lambda: 0)()
        expected_batch = sample_bytes * s.batch_size
        result.shm_size_bytes = shm_space()[0]
        result.nofile_soft = nofile_soft()
        result.open_files_needed = open_files_needed(open_files(), s.num_workers, s.prefetch_factor)
        if s.check_open_files and result.nofile_soft < result.open_files_needed:
            result.failure = classify(
                OSError(24, "Too many open files (checked before starting the workers)"),
                "",
                s.num_workers,
                s.prefetch_factor,
                expected_batch,
                open_files_need=result.open_files_needed,
            )
            result.wall_s = time.perf_counter() - began
            return result
        self.tracker = WorkerTracker()
        monitor = Monitor(self.tracker)
        loaders: list[DataLoader] = []
        threads = torch.get_num_threads()
        # One intra-op thread, as in the workers: on a GPU host the training process leaves
        # the cores to its workers, and an OpenMP team waiting for a descheduled member
        # would charge the loop for scheduling noise.
        torch.set_num_threads(1)
        error: Exception | None = None
        try:
            with warnings.catch_warnings(), monitor:
                warnings.simplefilter("ignore", UserWarning)  # e.g. more workers than cores
                self.device.prepare(s.step_time)
                loader = self._loader((warmup + measured) * s.batch_size, s.persistent_workers)
                loaders.append(loader)
                self._epoch(loader, result, warmup, measured)
                result.overlap = self.device.overlap()
                mode = "persistent" if s.persistent_workers else "not persistent"
                result.startup_s[mode] = self._first_batch_time(loader)
                _shutdown(loader)
                if s.startup_both and s.num_workers > 0:
                    other = self._loader(s.num_workers * s.batch_size, not s.persistent_workers)
                    loaders.append(other)
                    self._run_through(other)
                    mode = "not persistent" if s.persistent_workers else "persistent"
                    result.startup_s[mode] = self._first_batch_time(other)
                    _shutdown(other)
        except Exception as exc:
            error = exc
        finally:
            torch.set_num_threads(threads)
            for loader in loaders:
                with contextlib.suppress(Exception):
                    _shutdown(loader)
            del loaders
            gc.collect()
            result.killed_workers = self.tracker.reap()
            self.tracker.close()  # after the workers: their last words are in the log
            result.worker_log = self.tracker.log_text()[-4000:]
            result.shm_peak_bytes = monitor.shm_peak
            result.open_files_peak = max(monitor.main_fds_peak, monitor.worker_fds_peak)
            result.shm_needed_bytes = shm_needed(
                s.num_workers, s.prefetch_factor, result.batch_bytes or expected_batch
            )
            result.wall_s = time.perf_counter() - began
        if error is not None:
            result.failure = classify(
                error,
                self.tracker.log_text(),
                s.num_workers,
                s.prefetch_factor,
                result.batch_bytes or expected_batch,
                result.open_files_peak,
                result.open_files_needed,
            )
            if result.failure is None:
                raise error
        return result

    def _run_through(self, loader: DataLoader) -> None:
        feeder = self.device.feeder(self._iterate(loader), self.settings.prefetcher)
        try:
            while True:
                interrupt.raise_if_received()
                feeder.next()
        except StopIteration:
            pass
        finally:
            feeder.close()


def _shutdown(loader: DataLoader) -> None:
    """Stop the loader's workers now (persistent ones live as long as the loader)."""
    iterator = getattr(loader, "_iterator", None)
    stop = getattr(iterator, "_shutdown_workers", None)
    if stop is not None:
        stop()
    loader._iterator = None


def run(
    settings: LoopSettings,
    dataset: Dataset | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> LoopResult:
    return Loop(settings, dataset=dataset, on_step=on_step).run()
