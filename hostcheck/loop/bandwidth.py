"""Host-to-device copy bandwidth, pinned and pageable, against the PCIe link's rate (CUDA).

Each copy moves `nbytes` (256 MiB or more, so launch and fixed costs vanish) from a host
buffer to the GPU, timed with CUDA events; two untimed copies warm up, and the figure is the
median of `repeats`. The thread is pinned to the CPUs of the GPU's NUMA node while it
measures, and the host buffer is allocated after that (first touch places it on that node).
The link's theoretical rate is its generation's per-lane rate (after line coding) times its
width, both from NVML (the maximum the GPU and slot support: what the link should reach).
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from hostcheck.gpu import nvml
from hostcheck.system import System
from hostcheck.topology import read_numa

# Bytes per second per lane and direction: GT/s x coding / 8 (Gen6: PAM4 with FLIT mode,
# 242 payload bytes in 256).
LANE_BYTES_PER_S = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5e9 * 8 / 10 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}


def link_rate(generation: int | None, width: int | None) -> float | None:
    """Theoretical bytes/s of a PCIe link in one direction; None when unknown."""
    if not generation or not width or generation not in LANE_BYTES_PER_S:
        return None
    return LANE_BYTES_PER_S[generation] * width


@dataclass
class Bandwidth:
    device: str
    bus_id: str | None
    nbytes: int
    repeats: int
    pinned_bytes_per_s: float
    pageable_bytes_per_s: float
    pinned_runs: list[float] = field(default_factory=list)  # seconds per copy
    pageable_runs: list[float] = field(default_factory=list)
    link_generation: int | None = None
    link_width: int | None = None
    link_bytes_per_s: float | None = None
    numa_node: int | None = None
    cpus: list[int] | None = None  # what the measuring thread was pinned to
    notes: list[str] = field(default_factory=list)

    @property
    def link_fraction(self) -> float | None:
        if not self.link_bytes_per_s:
            return None
        return self.pinned_bytes_per_s / self.link_bytes_per_s

    def to_dict(self) -> dict:
        data = asdict(self)
        data["link_fraction"] = self.link_fraction
        return data


def torch_uuid(index: int) -> str | None:
    """The CUDA device's UUID as torch reports it, lower case, without NVML's 'GPU-'."""
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return None if uuid is None else _bare_uuid(str(uuid))


def _bare_uuid(text: str) -> str:
    text = text.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def numa_cpus(system: System, address: str | None) -> tuple[int | None, list[int] | None]:
    if address is None:
        return None, None
    node = system.read_int(f"/sys/bus/pci/devices/{address}/numa_node")
    if node is None or node < 0:
        return None, None
    return node, read_numa(system).get(node)


@dataclass
class Link:
    bus_id: str | None = None  # sysfs form, 0000:3b:00.0
    generation: int | None = None  # the maximum the GPU and slot support
    width: int | None = None
    problem: str | None = None


def nvml_link(uuid: str | None, index: int) -> Link:
    """The GPU's PCI address and link through NVML, matched to the CUDA device by UUID
    (CUDA and NVML may number GPUs differently); by index when torch gives no UUID."""
    nv = nvml.load_nvml()
    if nv is None:
        return Link(problem="pynvml is not installed")
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        return Link(problem=nvml.reason(exc))
    try:
        count, problem = nvml.ask(nv, "nvmlDeviceGetCount")
        handle = None
        for i in range(count or 0):
            candidate, _ = nvml.ask(nv, "nvmlDeviceGetHandleByIndex", i)
            found, _ = nvml.ask(nv, "nvmlDeviceGetUUID", candidate)
            if uuid and found is not None and _bare_uuid(nvml.text(found)) == uuid:
                handle = candidate
                break
        if handle is None:
            handle, problem = nvml.ask(nv, "nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                return Link(problem=problem)
        pci, _ = nvml.ask(nv, "nvmlDeviceGetPciInfo", handle)
        generation, _ = nvml.ask(nv, "nvmlDeviceGetMaxPcieLinkGeneration", handle)
        width, problem = nvml.ask(nv, "nvmlDeviceGetMaxPcieLinkWidth", handle)
        address = None if pci is None else nvml.normalize_bus_id(pci.busId)
        return Link(address, generation, width, problem)
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


@contextlib.contextmanager
def pinned_to(cpus: list[int] | None) -> Iterator[None]:
    """Run the calling thread on `cpus` for the duration (sched_setaffinity)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def time_copies(dst: Any, src: Any, repeats: int, warmup: int = 2) -> list[float]:
    """Seconds per host-to-device copy, CUDA-event timed, after `warmup` untimed copies."""
    for _ in range(warmup):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize(dst.device)
    runs = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / 1000)
    return runs


def measure(index: int, nbytes: int, repeats: int, system: System | None = None) -> Bandwidth:
    system = system or System()
    device = torch.device("cuda", index)
    link = nvml_link(torch_uuid(index), index)
    node, cpus = numa_cpus(system, link.bus_id)
    notes = [] if link.problem is None else [f"link rate unknown: {link.problem}"]
    if cpus is None:
        notes.append("NUMA node of the GPU unknown: the thread was not pinned")
    with pinned_to(cpus), torch.cuda.device(device):
        dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
        pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        pinned.fill_(1)  # first touch from the pinned thread: the GPU's node
        pinned_runs = time_copies(dst, pinned, repeats)
        del pinned
        pageable = torch.ones(nbytes, dtype=torch.uint8)
        pageable_runs = time_copies(dst, pageable, repeats)
        del pageable, dst
    return Bandwidth(
        device=f"cuda:{index}",
        bus_id=link.bus_id,
        nbytes=nbytes,
        repeats=repeats,
        pinned_bytes_per_s=nbytes / statistics.median(pinned_runs),
        pageable_bytes_per_s=nbytes / statistics.median(pageable_runs),
        pinned_runs=pinned_runs,
        pageable_runs=pageable_runs,
        link_generation=link.generation,
        link_width=link.width,
        link_bytes_per_s=link_rate(link.generation, link.width),
        numa_node=node,
        cpus=cpus,
        notes=notes,
    )
