"""The device layer: the only place where the CPU and CUDA paths of the loop differ.

A device moves a batch to where the step runs (`transfer`), hands batches to the loop
(`feeder`: directly, or through a prefetcher that has the next batch ready while the
current step runs) and runs the compute step (`step`).

CUDA, following the PyTorch docs and the apex `data_prefetcher`: the batch comes from the
DataLoader in pinned memory, is copied with `non_blocking=True` on a side stream and
normalised there; the step's stream `wait_stream`s the side stream before it uses the batch,
and `record_stream` tells the caching allocator that the step's stream uses that memory. The
step is a chain of matrix products sized (with CUDA events) to the step time.

CPU: there is no copy to make, so the prefetcher is a thread that keeps the next batch
ready; the step is a wait, which leaves the cores to the DataLoader workers as a GPU would.
Normalisation is left out on the CPU: on a GPU host the GPU does it, not the host's cores.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

import torch

# ImageNet mean and std in 0-255 units, as apex's prefetcher uses them.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

Interval = tuple[float, float]


class Feeder:
    """Gives the loop one batch per `next()`; StopIteration at the end of the epoch."""

    def next(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class DirectFeeder(Feeder):
    """No prefetcher: load the batch when the step asks for it, then transfer it."""

    def __init__(self, iterator: Any, transfer: Callable[[Any], Any]) -> None:
        self.iterator = iterator
        self.transfer = transfer

    def next(self) -> Any:
        return self.transfer(next(self.iterator))


_END = object()


class ThreadFeeder(Feeder):
    """A background thread keeps `depth` batches ready (the CPU prefetcher).

    Only `next(iterator)` runs in the thread: the iterator (and so the worker processes)
    is created by the caller's thread, which the workers' PR_SET_PDEATHSIG is tied to.
    """

    def __init__(self, iterator: Any, transfer: Callable[[Any], Any], depth: int = 1) -> None:
        self.iterator = iterator
        self.transfer = transfer
        self.ready: queue.Queue = queue.Queue(maxsize=depth)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="hostcheck-prefetch", daemon=True)
        self.thread.start()

    def _put(self, item: Any) -> bool:
        while not self.stopping.is_set():
            try:
                self.ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                item = self.transfer(next(self.iterator))
            except StopIteration:
                self._put(_END)
                return
            except BaseException as exc:  # handed to the loop's thread, raised there
                self._put(exc)
                return
            if not self._put(item):
                return

    def next(self) -> Any:
        while True:
            try:
                item = self.ready.get(timeout=0.5)
                break
            except queue.Empty:
                if not self.thread.is_alive() and self.ready.empty():
                    raise RuntimeError("the prefetch thread stopped without a batch") from None
        if item is _END:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.stopping.set()
        while True:  # unblock a put
            try:
                self.ready.get_nowait()
            except queue.Empty:
                break
        self.thread.join(timeout=2.0)


class CpuDevice:
    name = "cpu"
    is_cuda = False
    can_pin = False  # pinned memory needs an accelerator; the DataLoader ignores pin_memory

    def describe(self) -> str:
        return "cpu (no CUDA: the step is a calibrated wait)"

    def transfer(self, batch: Any) -> Any:
        return batch

    def feeder(self, iterator: Any, prefetch: bool) -> Feeder:
        if prefetch:
            return ThreadFeeder(iterator, self.transfer)
        return DirectFeeder(iterator, self.transfer)

    def prepare(self, step_s: float) -> None:
        pass

    def step(self, batch: Any, seconds: float) -> None:
        """Wait `seconds` without using a core (sleep to an absolute deadline)."""
        deadline = time.perf_counter() + seconds
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                return
            time.sleep(left)

    def overlap(self) -> float | None:
        return None


class CudaStreamFeeder(Feeder):
    """The apex data_prefetcher shape: copy and normalise batch N+1 on a side stream while
    the step of batch N runs on the current stream."""

    def __init__(self, iterator: Any, device: CudaDevice) -> None:
        self.iterator = iterator
        self.device = device
        self.stream = torch.cuda.Stream(device=device.torch_device)
        # the side stream uses mean/std made on the current stream: order after them
        self.stream.wait_stream(torch.cuda.current_stream(device.torch_device))
        self.next_batch: Any = None
        self._preload()

    def _preload(self) -> None:
        try:
            batch = next(self.iterator)
        except StopIteration:
            self.next_batch = None
            return
        with torch.cuda.stream(self.stream):
            start = self.device.event(self.stream)
            self.next_batch = self.device.transfer(batch)
            self.device.copies.append((start, self.device.event(self.stream)))

    def next(self) -> Any:
        current = torch.cuda.current_stream(self.device.torch_device)
        current.wait_stream(self.stream)
        batch = self.next_batch
        if batch is None:
            raise StopIteration
        for tensor in batch:
            tensor.record_stream(current)
        self._preload()
        return batch


class CudaDevice:
    name = "cuda"
    is_cuda = True
    can_pin = True

    def __init__(self, index: int | None = None) -> None:
        self.index = torch.cuda.current_device() if index is None else index
        self.torch_device = torch.device("cuda", self.index)
        self.mean = torch.tensor(MEAN, device=self.torch_device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=self.torch_device).view(1, 3, 1, 1)
        self.matrix = torch.randn(1024, 1024, device=self.torch_device)
        self.matmul_s = 0.0
        self.reference: torch.cuda.Event | None = None
        self.copies: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.computes: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def describe(self) -> str:
        props = torch.cuda.get_device_properties(self.index)
        return f"cuda:{self.index} {props.name}"

    def event(self, stream: Any = None) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        return event

    def transfer(self, batch: Any) -> Any:
        images, labels = batch
        images = images.to(self.torch_device, non_blocking=True)
        labels = labels.to(self.torch_device, non_blocking=True)
        images = images.float().sub_(self.mean).div_(self.std)
        return images, labels

    def feeder(self, iterator: Any, prefetch: bool) -> Feeder:
        if prefetch:
            return CudaStreamFeeder(iterator, self)
        return DirectFeeder(iterator, self.transfer)

    def _products(self, count: int) -> torch.Tensor:
        product = self.matrix
        for _ in range(count):
            product = torch.mm(self.matrix, product).clamp_(-1, 1)
        return product

    def prepare(self, step_s: float) -> None:
        """Time the step's unit, a 1024 x 1024 matrix product, with CUDA events (median of
        5 runs of 10, after a warm-up)."""
        self._products(3)
        times = []
        for _ in range(5):
            start = self.event()
            self._products(10)
            end = self.event()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000 / 10)
        times.sort()
        self.matmul_s = max(times[2], 1e-6)
        self.reference = self.event()
        self.copies.clear()
        self.computes.clear()

    def step(self, batch: Any, seconds: float) -> None:
        """Matrix products for about `seconds` that depend on the batch; then wait for them,
        so the loop's step time is the GPU's."""
        images = batch[0]
        start = self.event()
        acc = images.mean()
        product = self._products(max(1, round(seconds / self.matmul_s)))
        (acc + product[0, 0]).item()  # synchronises the current stream
        self.computes.append((start, self.event()))

    def overlap(self) -> float | None:
        """Share of the side-stream copy time that ran during a step (0..1)."""
        if self.reference is None or not self.copies or not self.computes:
            return None
        torch.cuda.synchronize(self.torch_device)
        ref = self.reference

        def span(pair: tuple[torch.cuda.Event, torch.cuda.Event]) -> Interval:
            return ref.elapsed_time(pair[0]) / 1000, ref.elapsed_time(pair[1]) / 1000

        return overlap_fraction([span(p) for p in self.copies], [span(p) for p in self.computes])


def overlap_fraction(copies: list[Interval], computes: list[Interval]) -> float | None:
    """Σ |copy ∩ (any compute)| / Σ |copy|: how much of the copying was hidden."""
    total = sum(max(0.0, end - start) for start, end in copies)
    if total <= 0:
        return None
    merged: list[list[float]] = []
    for start, end in sorted(computes):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    hidden = 0.0
    for start, end in copies:
        for c_start, c_end in merged:
            hidden += max(0.0, min(end, c_end) - max(start, c_start))
    return min(1.0, hidden / total)


def cuda_usable() -> bool:
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:
        return False


def device_for(name: str) -> CpuDevice | CudaDevice:
    """`auto`: CUDA when torch sees a GPU, else the CPU. `cuda` without a GPU is an error."""
    if name == "cpu":
        return CpuDevice()
    if name == "cuda" or (name == "auto" and cuda_usable()):
        if not cuda_usable():
            raise RuntimeError("device cuda asked for, but torch sees no usable CUDA GPU")
        return CudaDevice()
    return CpuDevice()
