"""What the GPUs did while `hostcheck job` ran the job: NVML sampled every SAMPLE_EVERY_S
(utilization, memory used, PCIe throughput where NVML gives it), which GPUs the job used,
and the verdict over the steady part of the run.

The GPUs the job used: those whose compute processes (NVML) included a process of the job;
when NVML names none of them (an older driver, a container's own process ids), those of the
job's CUDA_VISIBLE_DEVICES; else all. The steady part runs from the first steady batch (the
second of an epoch) to the last batch the DataLoader probe saw, in the processes on that GPU
when they are known. A GPU busy less than the profile's `job.min_gpu_utilization` of it fails:
with a loader failing its data-wait, as one finding saying the GPU waits for the DataLoader
(the data-wait's remedy), else as a GPU underused for a reason other than data loading.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hostcheck.gpu import nvml
from hostcheck.model import CheckResult, Finding, Status

CHECK_ID = "job-gpu"
SAMPLE_EVERY_S = 0.25
MIN_SAMPLES = 2  # samples in the steady part needed to judge a GPU
PCIE_TX, PCIE_RX = 0, 1  # nvmlPcieUtilCounter_t
KB = 1024  # NVML gives PCIe throughput in KB/s
NO_VALUE = -1
PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)
NO_PYNVML = "pynvml (nvidia-ml-py) is not installed: pip install 'hostcheck[node]'"
NOT_DATA_REMEDY = (
    "the step itself leaves the GPU idle: host work between kernels (.item(), .cpu() or "
    "printing the loss each step), a small batch_size, no mixed precision (torch.autocast), "
    "or waiting for other ranks; torch.profiler shows where the step goes"
)


@dataclass
class GpuTrace:
    """One GPU's samples: wall-clock times and values (NO_VALUE where NVML gave none)."""

    index: int
    name: str | None
    uuid: str | None
    at: array = field(default_factory=lambda: array("d"))
    utilization: array = field(default_factory=lambda: array("h"))  # percent
    memory_used: array = field(default_factory=lambda: array("q"))  # bytes
    pcie_tx: array = field(default_factory=lambda: array("q"))  # KB/s
    pcie_rx: array = field(default_factory=lambda: array("q"))
    compute_pids: set[int] = field(default_factory=set)  # any process NVML named on it
    job_pids: set[int] = field(default_factory=set)  # those that were the job's


@dataclass
class GpuUse:
    """What the sampler saw; `problem` says why nothing was sampled (no NVML, no GPU)."""

    problem: str | None
    visible_devices: str | None  # CUDA_VISIBLE_DEVICES of the job's environment
    gpus: list[GpuTrace] = field(default_factory=list)
    every_s: float = SAMPLE_EVERY_S


def _value(answer: Any, attribute: str | None = None) -> int:
    if answer is None:
        return NO_VALUE
    return int(getattr(answer, attribute) if attribute else answer)


class Sampler:
    """Samples every GPU through NVML in a thread of its own until stopped."""

    def __init__(
        self, visible_devices: str | None, every_s: float = SAMPLE_EVERY_S, nv: Any = None
    ) -> None:
        self.use = GpuUse(None, visible_devices, every_s=every_s)
        self._nv = nv
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostcheck-job-gpu", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, job_pids: Iterable[int]) -> GpuUse:
        """Stop sampling; the job's processes (every pid it had) mark the GPUs it used."""
        self._stop.set()
        self._thread.join()
        pids = set(job_pids)
        for trace in self.use.gpus:
            trace.job_pids = trace.compute_pids & pids
        return self.use

    def _run(self) -> None:
        nv = self._nv or nvml.load_nvml()
        if nv is None:
            self.use.problem = NO_PYNVML
            return
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            self.use.problem = f"no NVIDIA driver (NVML: {nvml.reason(exc)})"
            return
        try:
            handles = self._open(nv)
            while handles:
                for trace, handle in handles:
                    self._sample(nv, trace, handle)
                if self._stop.wait(self.use.every_s):
                    break
        finally:
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlShutdown()

    def _open(self, nv: Any) -> list[tuple[GpuTrace, Any]]:
        count, problem = nvml.ask(nv, "nvmlDeviceGetCount")
        if not count:
            self.use.problem = (
                f"NVML cannot count the GPUs: {problem}"
                if problem
                else "no GPU: the NVIDIA driver is loaded but shows none"
            )
            return []
        handles = []
        for index in range(count):
            handle, _ = nvml.ask(nv, "nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                continue  # lost or inaccessible: the gpu check of hostcheck run says why
            name, _ = nvml.ask(nv, "nvmlDeviceGetName", handle)
            uuid, _ = nvml.ask(nv, "nvmlDeviceGetUUID", handle)
            trace = GpuTrace(
                index,
                None if name is None else nvml.text(name),
                None if uuid is None else nvml.text(uuid),
            )
            handles.append((trace, handle))
        self.use.gpus = [trace for trace, _ in handles]
        if not handles:
            self.use.problem = f"NVML gives no handle for any of its {count} GPUs"
        return handles

    @staticmethod
    def _sample(nv: Any, trace: GpuTrace, handle: Any) -> None:
        at = time.time()
        rates, _ = nvml.ask(nv, "nvmlDeviceGetUtilizationRates", handle)
        memory, _ = nvml.ask(nv, "nvmlDeviceGetMemoryInfo", handle)
        tx, _ = nvml.ask(nv, "nvmlDeviceGetPcieThroughput", handle, PCIE_TX)
        rx, _ = nvml.ask(nv, "nvmlDeviceGetPcieThroughput", handle, PCIE_RX)
        processes, _ = nvml.ask_first(nv, PROCESS_CALLS, handle)
        trace.at.append(at)
        trace.utilization.append(_value(rates, "gpu"))
        trace.memory_used.append(_value(memory, "used"))
        trace.pcie_tx.append(_value(tx))
        trace.pcie_rx.append(_value(rx))
        for process in processes or ():
            trace.compute_pids.add(int(process.pid))


# ------------------------------------------------------------------ which GPUs, which time


def steady_window(
    processes: list[dict], pids: set[int] | None = None
) -> tuple[float, float] | None:
    """(first steady batch, last batch) over the loaders of these processes (all when pids is
    None or names none of them), as wall-clock times; None without a steady batch."""
    chosen = [p for p in processes if pids and p.get("pid") in pids] or processes
    loaders = [
        lo for p in chosen for lo in p.get("loaders", ()) if lo.get("first_steady_at") is not None
    ]
    if not loaders:
        return None
    began = min(lo["first_steady_at"] for lo in loaders)
    ended = max(lo["last_batch_at"] or began for lo in loaders)
    return began, max(began, ended)


def _visible(gpus: list[GpuTrace], value: str) -> list[GpuTrace] | None:
    """The GPUs CUDA_VISIBLE_DEVICES names (indices or GPU-UUID prefixes; CUDA stops at the
    first it cannot find); None when it names them some other way (MIG devices)."""
    chosen = []
    for word in (w.strip() for w in value.split(",")):
        if word.lstrip("-").isdigit():
            match = [g for g in gpus if g.index == int(word)]
        elif word.startswith("GPU-"):
            match = [g for g in gpus if g.uuid and g.uuid.startswith(word)]
        elif word == "" and not chosen:
            match = []
        else:
            return None
        if len(match) != 1:
            break
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen


def used_gpus(use: GpuUse) -> tuple[list[GpuTrace], str]:
    """The GPUs the job used and how that was told: processes, CUDA_VISIBLE_DEVICES or all."""
    by_process = [g for g in use.gpus if g.job_pids]
    if by_process:
        return by_process, "processes"
    if use.visible_devices is not None:
        visible = _visible(use.gpus, use.visible_devices)
        if visible is not None:
            return visible, "CUDA_VISIBLE_DEVICES"
    return list(use.gpus), "all"


def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(trace: GpuTrace, window: tuple[float, float] | None) -> dict:
    """One GPU as the report shows it: utilization (fractions) and PCIe throughput over the
    steady part, memory used at its peak over the whole run."""
    inside = [i for i, at in enumerate(trace.at) if window and window[0] <= at <= window[1]]
    busy = [trace.utilization[i] for i in inside if trace.utilization[i] != NO_VALUE]
    memory = [m for m in trace.memory_used if m != NO_VALUE]

    def rate(values: array) -> float | None:
        mean = _mean([values[i] for i in inside if values[i] != NO_VALUE])
        return None if mean is None else round(mean * KB, 1)

    judged = len(busy) >= MIN_SAMPLES
    return {
        "index": trace.index,
        "name": trace.name,
        "uuid": trace.uuid,
        "job_pids": sorted(trace.job_pids),
        "samples": len(trace.at),
        "steady_samples": len(busy),
        "utilization_mean": round(sum(busy) / len(busy) / 100, 4) if judged else None,
        "utilization_median": round(statistics.median(busy) / 100, 4) if judged else None,
        "memory_used_peak_bytes": max(memory) if memory else None,
        "pcie_rx_bytes_per_s_mean": rate(trace.pcie_rx),
        "pcie_tx_bytes_per_s_mean": rate(trace.pcie_tx),
    }


def section(use: GpuUse | None, processes: list[dict]) -> dict | None:
    """The `gpu` part of the report's job section."""
    if use is None:
        return None
    gpus, chosen_by = used_gpus(use)
    summaries = []
    for trace in gpus:
        window = steady_window(processes, trace.job_pids or None)
        entry = summarize(trace, window)
        entry["steady_s"] = None if window is None else round(window[1] - window[0], 3)
        summaries.append(entry)
    return {
        "problem": use.problem,
        "sample_every_s": use.every_s,
        "cuda_visible_devices": use.visible_devices,
        "chosen_by": None if use.problem else chosen_by,
        "gpus": summaries,
    }


# ------------------------------------------------------------------ the verdict


def _starving(
    gpu: dict, loader_results: list[tuple[int, CheckResult]]
) -> tuple[str, Finding] | None:
    """The worst failing data-wait of the loaders in the processes on this GPU (any loader
    when those are not known): (its check's id, its finding), or None."""
    failing = [
        (pid, result.id, finding)
        for pid, result in loader_results
        for finding in result.findings
        if finding.name == "data-wait" and finding.status == Status.FAIL
    ]
    own = [f for f in failing if f[0] in gpu["job_pids"]] or failing
    if not own:
        return None
    _, check_id, finding = max(own, key=lambda f: f[2].measured)
    return check_id, finding


def _gpu_finding(
    gpu: dict, threshold: float, loader_results: list[tuple[int, CheckResult]]
) -> Finding:
    name, expected = f"gpu{gpu['index']}", f">= {threshold:.0%}"
    mean, median = gpu["utilization_mean"], gpu["utilization_median"]
    if mean is None:
        return Finding(
            name,
            Status.SKIP,
            None,
            expected,
            display=f"GPU {gpu['index']} not judged: {gpu['steady_samples']} samples in the "
            f"steady part of the run (one every {SAMPLE_EVERY_S} s)",
        )
    busy = f"GPU {gpu['index']} busy {mean:.0%} of the steady run (median {median:.0%})"
    if mean >= threshold:
        return Finding(name, Status.PASS, mean, expected, display=busy)
    starving = _starving(gpu, loader_results)
    if starving is not None:
        check_id, wait = starving
        return Finding(
            name,
            Status.FAIL,
            mean,
            expected,
            display=f"{busy} while the job waited for data {wait.measured:.0%} of step time "
            f"({check_id}): the GPU waits for the DataLoader",
            remedy=wait.remedy,
        )
    return Finding(
        name,
        Status.FAIL,
        mean,
        expected,
        display=f"{busy} with no loader failing its data-wait: the GPU is underused for a "
        "reason other than data loading",
        remedy=NOT_DATA_REMEDY,
    )


def check(
    use: GpuUse | None,
    processes: list[dict],
    loader_results: list[tuple[int, CheckResult]],
    threshold: float,
) -> CheckResult:
    """`job-gpu`: each GPU the job used against the threshold, tied to the data-wait of the
    loaders (pid, their check) when it idles; skipped, with the reason, without NVML or GPU."""
    if use is None or use.problem:
        reason = use.problem if use else "the job did not start"
        return CheckResult.skipped(CHECK_ID, f"GPU utilization not measured: {reason}")
    shown = section(use, processes)
    if not shown["gpus"]:
        return CheckResult.skipped(
            CHECK_ID,
            f"the job used no GPU (CUDA_VISIBLE_DEVICES={use.visible_devices!r})",
            shown,
        )
    if all(gpu["steady_s"] is None for gpu in shown["gpus"]):
        return CheckResult.skipped(
            CHECK_ID, "GPU utilization not judged: no steady batch (the job's data-wait neither)"
        )
    findings = [_gpu_finding(gpu, threshold, loader_results) for gpu in shown["gpus"]]
    bad = [f for f in findings if f.status != Status.PASS] or findings
    return CheckResult.from_findings(
        CHECK_ID,
        findings,
        data={"min_gpu_utilization": threshold, **shown},
        summary="; ".join(f.display for f in bad),
        expected=f"each GPU the job used busy >= {threshold:.0%} of the steady run",
    )


TABLE_TITLES = {
    "processes": "GPUs the job used (NVML lists its processes on them)",
    "CUDA_VISIBLE_DEVICES": "GPUs the job used (its CUDA_VISIBLE_DEVICES)",
    "all": "GPUs of this host (NVML lists no process of the job on any)",
}


def table(shown: dict):
    """The console's table of the GPUs the job used (rich)."""
    from hostcheck._shared.sizes import format_size
    from hostcheck.report.console import titled_table

    def rate(value: float | None) -> str:
        return "-" if value is None else f"{format_size(int(value))}/s"

    grid = titled_table(TABLE_TITLES.get(shown["chosen_by"], "GPUs the job used"))
    for name in ("gpu", "name", "busy", "median", "mem peak", "pcie rx", "pcie tx", "samples"):
        grid.add_column(name, justify="left" if name == "name" else "right", overflow="fold")
    for gpu in shown["gpus"]:
        mean, median = gpu["utilization_mean"], gpu["utilization_median"]
        peak = gpu["memory_used_peak_bytes"]
        grid.add_row(
            str(gpu["index"]),
            gpu["name"] or "-",
            "-" if mean is None else f"{mean:.0%}",
            "-" if median is None else f"{median:.0%}",
            "-" if peak is None else format_size(peak),
            rate(gpu["pcie_rx_bytes_per_s_mean"]),
            rate(gpu["pcie_tx_bytes_per_s_mean"]),
            f"{gpu['steady_samples']}/{gpu['samples']}",
        )
    grid.caption = (
        "busy, median: NVML utilization (time a kernel ran) over the steady part of the run "
        "(first steady batch to last batch); mem peak: memory used on the GPU, whole run; "
        "pcie: mean throughput over the steady part (- where NVML gives none); samples: in "
        f"the steady part / all, one every {shown['sample_every_s']} s"
    )
    grid.caption_justify = "left"
    return grid
