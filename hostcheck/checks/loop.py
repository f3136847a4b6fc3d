"""The synthetic training loop: can this host feed its GPU at the profile's step time?

Runs the loop of hostcheck.loop with the profile's setting (num_workers null: the workers
per rank the cpu check computes), and on CUDA measures host-to-device bandwidth. torch is
imported only when the check runs, never when hostcheck starts.
"""

from __future__ import annotations

from typing import Any

from hostcheck._shared.cpus import worker_cores
from hostcheck._shared.dataloader_workload import ranks_per_node
from hostcheck._shared.sizes import format_size
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.checks.cpu import workers_per_rank
from hostcheck.loop import settings as loop_settings
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.pci import nvidia_gpus
from hostcheck.system import System
from hostcheck.topology import read_topology
from hostcheck.units import format_ratio

SCHEMA = loop_settings.SCHEMA
SWEEP_HINT = "hostcheck loop --sweep finds the smallest num_workers that feeds the step"
PILLOW_FIX = (
    "set pillow_simd_enabled: true (role pillow_simd) and run: "
    "ansible-playbook site.yml --tags pillow_simd"
)
LINK_FIX = (
    "not fixable by a role variable: see the gpu check's pcie gen/width, boot with "
    "iommu=pt, and set the slot to its full PCIe speed in the BIOS"
)


def host_workers(system: System, section: dict) -> tuple[int, int, int]:
    """(physical cores, ranks, num_workers per rank) for a null num_workers: the cpu check's
    (cores - 1 x ranks) // ranks, ranks one per NVIDIA GPU on the PCI bus (1 if none)."""
    cores = worker_cores(read_topology(system).core_of)
    ranks = ranks_per_node(section.get("ranks"), len(nvidia_gpus(system)))
    return cores, ranks, workers_per_rank(cores, ranks, 1)


def _wait_remedy(result: Any, settings: loop_settings.LoopSettings) -> str:
    workers = settings.num_workers
    if workers == 0:
        return f"use DataLoader(num_workers>0): {SWEEP_HINT}"
    busy = result.worker_cpu_cores / workers
    waiting = (result.worker_cpu_wait_cores or 0.0) / workers
    if waiting >= 0.15:
        return (
            f"the workers waited for a CPU {waiting:.0%} of the time: other processes use "
            "this host's cores (other jobs or ranks); give each rank its cores, or "
            f"{SWEEP_HINT}"
        )
    if busy >= 0.8:
        return (
            f"the {workers} worker(s) are CPU-bound ({result.worker_cpu_cores:.2f} cores busy): "
            f"raise num_workers if cores are free ({SWEEP_HINT}); make decoding cheaper: "
            f"{PILLOW_FIX}; or run fewer ranks per host"
        )
    where = (
        " (or stage the dataset on local NVMe: role dataset_staging)"
        if (settings.dataset_path)
        else ""
    )
    return (
        f"the workers are only {busy:.0%} busy: they wait for I/O or the hand-over; raise "
        f"num_workers or prefetch_factor ({SWEEP_HINT}){where}"
    )


def loop_findings(result: Any, settings: loop_settings.LoopSettings, cfg: dict) -> list[Finding]:
    """What one run of the loop means against the profile's thresholds."""
    if result.failure is not None:
        return [
            Finding(
                "loop",
                Status.FAIL,
                result.failure.kind,
                "runs to the end",
                result.failure.message,
                "hostcheck.loop (DataLoader)",
                result.failure.remedy,
            )
        ]
    limit = cfg["max_data_wait"]
    wanted = settings.batch_size / settings.step_time if settings.step_time else None
    findings = [
        Finding(
            "data-wait",
            Status.PASS if result.data_wait_fraction <= limit else Status.FAIL,
            round(result.data_wait_fraction, 4),
            f"<= {format_ratio(limit)} of step time",
            f"{format_ratio(result.data_wait_fraction)} of step time "
            f"({1000 * result.data_wait_s:.1f} ms of {1000 * result.step_s:.1f} ms)",
            f"{result.batches} steps after {result.warmup_batches} warm-up, perf_counter",
            _wait_remedy(result, settings),
            unit="ratio",
        ),
        Finding(
            "throughput",
            Status.PASS,
            round(result.samples_per_s, 1),
            f"{wanted:.0f} samples/s (batch {settings.batch_size} / step "
            f"{settings.step_time * 1000:.0f} ms)"
            if wanted
            else "",
            f"{result.samples_per_s:.0f} samples/s, step {1000 * result.step_s:.1f} ms "
            f"(p95 {1000 * result.step_p95_s:.1f} ms)"
            + (
                f", samples read from {result.dataset_files} files under {settings.dataset_path}"
                if result.dataset_files
                else ""
            ),
            "measured steps",
        ),
        Finding(
            "worker cpu",
            Status.PASS,
            round(result.worker_cpu_cores, 3),
            "",
            f"{result.worker_cpu_cores:.2f} cores for {settings.num_workers} worker(s)"
            + (
                f" ({1000 * result.worker_cpu_per_sample_s:.2f} ms of CPU per sample)"
                if result.worker_cpu_per_sample_s
                else ""
            )
            + f", main process {result.main_cpu_cores:.2f}"
            + (
                f"; workers waited for a CPU {result.worker_cpu_wait_cores:.2f} cores' worth"
                if result.worker_cpu_wait_cores is not None and settings.num_workers
                else ""
            ),
            "/proc/<pid>/stat utime+stime, /proc/<pid>/schedstat run delay",
        ),
    ]
    shm_shown = (
        f"peak {format_size(result.shm_peak_bytes)} "
        f"(workers x prefetch_factor x batch: {format_size(result.shm_needed_bytes)}) "
        f"of {format_size(result.shm_size_bytes)}"
    )
    findings.append(
        Finding(
            "shm",
            Status.PASS
            if max(result.shm_peak_bytes, result.shm_needed_bytes) <= result.shm_size_bytes
            else Status.WARN,
            result.shm_peak_bytes,
            f"<= /dev/shm size {format_size(result.shm_size_bytes)}",
            shm_shown,
            "statvfs(/dev/shm) sampled every 5 ms",
            "set shm_size (role shm) and run: ansible-playbook site.yml --tags shm",
            unit="bytes",
        )
    )
    if result.startup_s:
        shown = ", ".join(f"{mode} {seconds:.3f} s" for mode, seconds in result.startup_s.items())
        findings.append(
            Finding(
                "epoch start-up",
                Status.PASS,
                {k: round(v, 4) for k, v in result.startup_s.items()},
                "",
                f"iter() to first batch: {shown}",
                "second epoch",
            )
        )
    return findings


def bandwidth_findings(bandwidth: Any, overlap: float | None, cfg: dict) -> list[Finding]:
    source = f"{format_size(bandwidth.nbytes)} copies, median of {bandwidth.repeats}, CUDA events"
    fraction = bandwidth.link_fraction
    minimum = cfg["min_link_fraction"]
    link = (
        f"Gen{bandwidth.link_generation} x{bandwidth.link_width} = "
        f"{bandwidth.link_bytes_per_s / 1e9:.1f} GB/s"
        if bandwidth.link_bytes_per_s
        else "link rate unknown"
    )
    if fraction is None:
        status = Status.WARN
    else:
        status = Status.PASS if fraction >= minimum else Status.FAIL
    findings = [
        Finding(
            "pinned bandwidth",
            status,
            round(bandwidth.pinned_bytes_per_s),
            f">= {minimum:.0%} of the link ({link})",
            f"{bandwidth.pinned_bytes_per_s / 1e9:.1f} GB/s"
            + (f" = {fraction:.0%} of {link}" if fraction is not None else f" ({link})"),
            source,
            LINK_FIX,
        ),
        Finding(
            "pinned vs pageable",
            Status.PASS
            if bandwidth.pinned_bytes_per_s > bandwidth.pageable_bytes_per_s
            else Status.FAIL,
            round(bandwidth.pageable_bytes_per_s),
            "pinned faster than pageable",
            f"pageable {bandwidth.pageable_bytes_per_s / 1e9:.1f} GB/s, pinned "
            f"{bandwidth.pinned_bytes_per_s / 1e9:.1f} GB/s",
            source,
            "not fixable by a role variable: pinned copies should be about twice as fast; "
            "check IOMMU (iommu=pt) and what else uses the link",
        ),
    ]
    if overlap is not None:
        findings.append(
            Finding(
                "overlap",
                Status.PASS,
                round(overlap, 3),
                "",
                f"{overlap:.0%} of the prefetcher's copy time hidden behind steps",
                "CUDA events on the side and compute streams",
            )
        )
    return findings


def summary(result: Any, settings: loop_settings.LoopSettings, bandwidth: Any) -> str:
    text = (
        f"{result.samples_per_s:.0f} samples/s, "
        f"data-wait {format_ratio(result.data_wait_fraction)} of step time; "
        f"{settings.label()} persistent_workers="
        f"{settings.persistent_workers} on {result.device.split(' ')[0]}"
    )
    if bandwidth is not None:
        text += f"; pinned {bandwidth.pinned_bytes_per_s / 1e9:.1f} GB/s"
    return text


def assess(
    result: Any,
    settings: loop_settings.LoopSettings,
    cfg: dict,
    bandwidth: Any = None,
    bandwidth_note: str | None = None,
    data: dict | None = None,
) -> CheckResult:
    findings = loop_findings(result, settings, cfg)
    if bandwidth is not None:
        findings += bandwidth_findings(bandwidth, result.overlap, cfg)
    elif bandwidth_note:
        findings.append(
            Finding("pinned bandwidth", Status.SKIP, None, "", bandwidth_note, "torch.cuda")
        )
    payload = dict(data or {})
    payload["settings"] = settings.loader_kwargs() | {
        "prefetcher": settings.prefetcher,
        "sample": settings.sample,
        "step_time": settings.step_time,
        "dataset_path": settings.dataset_path,
    }
    payload["result"] = result.to_dict()
    payload["bandwidth"] = bandwidth.to_dict() if bandwidth is not None else None
    bad = any(f.status in (Status.FAIL, Status.WARN, Status.ERROR) for f in findings)
    return CheckResult.from_findings(
        "loop",
        findings,
        payload,
        summary=None if bad else summary(result, settings, bandwidth),
    )


def _missing(module: str) -> str | None:
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else module


def prepare(
    system: System, section: dict, dataset_path: str | None
) -> tuple[loop_settings.LoopSettings, dict]:
    cores, ranks, workers = host_workers(system, section)
    settings = loop_settings.from_section(section, workers)
    if dataset_path:
        settings = settings.replace(dataset_path=dataset_path)
    data = {
        "physical_cores": cores,
        "ranks": ranks,
        "num_workers_source": "profile loop.num_workers"
        if section.get("num_workers") is not None
        else f"({cores} cores - 1 x {ranks} ranks) // {ranks} ranks",
    }
    return settings, data


def run(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    if _missing("torch"):
        return CheckResult.skipped(
            "loop", "torch is not installed in this Python (pip install 'hostcheck[node]')"
        )
    if cfg["sample"] == "jpeg" and _missing("PIL"):
        return CheckResult.skipped(
            "loop", "PIL is not installed: jpeg samples need pillow (or set loop.sample: busy)"
        )
    settings, data = prepare(ctx.system, cfg, ctx.options.dataset_path)
    from hostcheck.loop import device as loop_device
    from hostcheck.loop import measure

    try:
        device = loop_device.device_for(settings.device)
    except RuntimeError as exc:
        status = Status.FAIL if ctx.require_gpu or settings.device == "cuda" else Status.SKIP
        finding = Finding("device", status, None, "a usable CUDA GPU", str(exc), "torch.cuda")
        return CheckResult.from_findings("loop", [finding], data)
    result = measure.Loop(settings, device=device).run()
    bandwidth, note = None, None
    if device.is_cuda and result.failure is None:
        from hostcheck.loop import bandwidth as loop_bandwidth

        bandwidth = loop_bandwidth.measure(
            device.index,
            loop_settings.bandwidth_bytes(cfg),
            cfg["bandwidth_repeats"],
            ctx.system,
        )
    elif not device.is_cuda:
        note = "no CUDA GPU: host-to-device bandwidth not measured"
    return assess(result, settings, cfg, bandwidth, note, data)


SPEC = CheckSpec(
    id="loop",
    title="synthetic training loop: data-wait, throughput, H2D bandwidth",
    explain=(
        "Runs a synthetic training loop with the profile's DataLoader setting (loop.*; "
        "num_workers null: the workers per rank the cpu check computes): samples that "
        "decode a JPEG with PIL, random-resized-crop and flip it (or burn a calibrated "
        "amount of CPU), optionally read from --dataset-path; a prefetcher that copies the "
        "next batch while the step runs (a side CUDA stream with pinned memory, or a thread "
        "on the CPU); a step of loop.step_time (a sized GPU kernel, or a wait on the CPU). "
        "It measures samples/s, step time, data-wait (time blocked on the next batch) as a "
        "share of step time, worker CPU, peak /dev/shm use and epoch start-up with "
        "persistent_workers on and off; on CUDA also host-to-device bandwidth pinned and "
        "pageable against the PCIe link's rate (NVML) and the prefetcher's overlap. Fails "
        "when data-wait exceeds loop.max_data_wait (a GPU waiting for data is money "
        "burnt), when pinned bandwidth is under loop.min_link_fraction of the link, when "
        "pinned is not faster than pageable, or when workers die (/dev/shm too small, too "
        "few open files)."
    ),
    run=run,
    schema=SCHEMA,
    roles=("shm", "ulimits", "pillow_simd"),
)
