"""The host as a job met it: per process of the job, the open files against its own soft
RLIMIT_NOFILE, the CPUs it may run on against the DataLoader workers it started, and the
bytes its loaders' workers read.

hostcheck job's watcher calls `Sampler.sample` every 0.25 s with the job's processes; what it
saw is judged here against what the probe wrote (which processes train, which processes are
their loaders' workers). Findings go into the `job` check beside /dev/shm; the figures go
into each rank's entry (`host`) and each loader's (`worker_reads`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import psutil

from hostcheck._shared.sizes import format_size
from hostcheck.model import Finding, Status

OPEN_FILES_WARN_FRACTION = 0.8
# A data-wait remedy points at storage when at least this share of the workers' reads came
# from it rather than from the page cache.
STORAGE_SHARE_FOR_HINT = 0.5


@dataclass
class ProcessUse:
    """What the sampler saw of one process of the job."""

    pid: int
    first_tick: int
    last_tick: int
    open_files: int = 0  # at the sample nearest its limit
    open_files_limit: int | None = None  # its soft RLIMIT_NOFILE then; None: unlimited
    affinity: list[int] | None = None  # the CPUs it may run on, last seen
    read_chars: int | None = None  # /proc/PID/io rchar: bytes read, page cache included
    read_bytes: int | None = None  # /proc/PID/io read_bytes: bytes fetched from storage

    @property
    def open_files_fraction(self) -> float:
        return _fraction(self.open_files, self.open_files_limit)


def _fraction(files: int, limit: int | None) -> float:
    return files / limit if limit else 0.0


def read_io(pid: int) -> tuple[int, int | None] | None:
    """(rchar, read_bytes) of a process from /proc/PID/io; read_bytes is None where the
    kernel does not count it; None when the file cannot be read."""
    try:
        with open(f"/proc/{pid}/io") as stream:
            fields = dict(line.split(": ", 1) for line in stream.read().splitlines())
        storage = fields.get("read_bytes")
        return int(fields["rchar"]), int(storage) if storage is not None else None
    except (OSError, ValueError, KeyError):
        return None


class Sampler:
    """Open files and their limit, CPU affinity and read counters of the job's processes."""

    def __init__(self) -> None:
        self.processes: dict[int, ProcessUse] = {}
        self.tick = 0
        self._gone: set[int] = set()

    def sample(self, known: dict[int, psutil.Process]) -> None:
        self.tick += 1
        for pid, process in list(known.items()):
            if pid in self._gone:
                continue
            try:
                self._sample_one(pid, process)
            except psutil.NoSuchProcess:  # ended, or a zombie not yet reaped
                self._gone.add(pid)
            except psutil.Error:
                continue

    def _sample_one(self, pid: int, process: psutil.Process) -> None:
        files = process.num_fds()
        soft, _ = process.rlimit(psutil.RLIMIT_NOFILE)
        limit = None if soft == psutil.RLIM_INFINITY else soft
        use = self.processes.get(pid)
        if use is None:
            use = self.processes[pid] = ProcessUse(pid, self.tick, self.tick)
        use.last_tick = self.tick
        if (_fraction(files, limit), files) > (use.open_files_fraction, use.open_files):
            use.open_files, use.open_files_limit = files, limit
        with contextlib.suppress(psutil.Error, OSError):
            use.affinity = sorted(process.cpu_affinity())
        counters = read_io(pid)
        if counters is not None:
            use.read_chars, use.read_bytes = counters


# --- figures for the report ------------------------------------------------------------------


def _limit_raw(limit: int | None) -> int | str:
    return "unlimited" if limit is None else limit


def _workers_of(process: dict) -> list[int]:
    return sorted({pid for lo in process["loaders"] for pid in lo["worker_pids"]})


def _peak_at_once(uses: list[ProcessUse]) -> int:
    """The most of these processes the sampler saw alive at the same sample."""
    events = sorted([(u.first_tick, 1) for u in uses] + [(u.last_tick + 1, -1) for u in uses])
    alive = peak = 0
    for _, change in events:
        alive += change
        peak = max(peak, alive)
    return peak


def _workers_at_once(processes: list[dict], uses: dict[int, ProcessUse]) -> int:
    """DataLoader workers of these training processes alive at once: as the sampler saw
    them, and at least each process's largest iterated loader's num_workers."""
    seen = [uses[pid] for p in processes for pid in _workers_of(p) if pid in uses]
    started = sum(
        max((lo["settings"]["num_workers"] for lo in p["loaders"] if lo["iterations"]), default=0)
        for p in processes
    )
    return max(_peak_at_once(seen), started)


def _nearest_limit(uses: list[ProcessUse]) -> ProcessUse | None:
    return max(uses, key=lambda u: (u.open_files_fraction, u.open_files), default=None)


def process_entry(process: dict, uses: dict[int, ProcessUse]) -> dict:
    """`host` of a training process's entry: its open files, its workers', its CPUs."""
    own = uses.get(process["pid"])
    worker = _nearest_limit([uses[pid] for pid in _workers_of(process) if pid in uses])
    return {
        "open_files_peak": own.open_files if own else None,
        "open_files_limit": _limit_raw(own.open_files_limit) if own else None,
        "workers_open_files_peak": worker.open_files if worker else None,
        "workers_open_files_limit": _limit_raw(worker.open_files_limit) if worker else None,
        "workers_open_files_pid": worker.pid if worker else None,
        "cpu_affinity": own.affinity if own else None,
        "workers_at_once": _workers_at_once([process], uses),
    }


def loader_reads(loader: dict, uses: dict[int, ProcessUse]) -> dict | None:
    """`worker_reads` of a loader: what its workers read, and per second of the time the
    loader was iterated (first iter() to last batch); None without workers or counters."""
    at_shutdown = loader.get("worker_io", {})
    chars, storage, counted, storage_counted = 0, 0, False, True
    for pid in loader["worker_pids"]:
        sampled = uses.get(pid)
        readings = [r for r in (at_shutdown.get(str(pid)),) if r]
        if sampled is not None and sampled.read_chars is not None:
            readings.append((sampled.read_chars, sampled.read_bytes))
        if not readings:
            continue
        counted = True
        chars += max(r[0] for r in readings)
        known = [r[1] for r in readings if r[1] is not None]
        storage_counted = storage_counted and bool(known)
        storage += max(known, default=0)
    if not counted:
        return None
    active = None
    if loader["first_iter_at"] is not None and loader["last_batch_at"] is not None:
        active = loader["last_batch_at"] - loader["first_iter_at"]

    def per_s(count):
        return round(count / active, 1) if active and active > 0 and count is not None else None

    storage_total = storage if storage_counted else None
    return {
        "bytes": chars,
        "bytes_per_s": per_s(chars),
        "storage_bytes": storage_total,
        "storage_bytes_per_s": per_s(storage_total),
        "active_s": round(active, 3) if active is not None else None,
    }


def loader_fields(loader: dict, run) -> dict:
    """What a loader's report entry gains here (run: the JobRun)."""
    return {"worker_reads": loader_reads(loader, run.host_use)}


# --- findings ---------------------------------------------------------------------------------


def _who(process: dict) -> str:
    return f"rank{process['rank']}" if process.get("rank") is not None else f"pid{process['pid']}"


def _alone(processes: list[dict]) -> bool:
    return len(processes) == 1 and processes[0].get("rank") is None


def _open_files_remedy(has_workers: bool) -> str:
    remedy = (
        "raise the open-files limit (role variables ulimits_nofile_soft, ulimits_nofile_hard; "
        "a job that lowers its own with setrlimit keeps the lower one), and close files the "
        "dataset opens"
    )
    if has_workers:
        remedy += (
            "; each tensor a worker hands over holds a descriptor until it is freed: fewer "
            "DataLoader num_workers or a smaller prefetch_factor, or "
            "torch.multiprocessing.set_sharing_strategy('file_system')"
        )
    return remedy


def _open_files_text(use: ProcessUse) -> str:
    if use.open_files_limit is None:
        return f"{use.open_files} (no limit)"
    return f"{use.open_files} of {use.open_files_limit} ({use.open_files_fraction:.0%})"


def _open_files_findings(processes: list[dict], uses: dict[int, ProcessUse]) -> list[Finding]:
    expected = f"< {OPEN_FILES_WARN_FRACTION:.0%} of the soft RLIMIT_NOFILE"
    alone = _alone(processes)
    findings, calm = [], []
    for process in processes:
        workers = [uses[pid] for pid in _workers_of(process) if pid in uses]
        own = [uses[process["pid"]]] if process["pid"] in uses else []
        nearest = _nearest_limit(own + workers)
        if nearest is None:
            continue
        fraction = nearest.open_files_fraction
        status = (
            Status.FAIL
            if fraction >= 1
            else (Status.WARN if fraction >= OPEN_FILES_WARN_FRACTION else Status.PASS)
        )
        parts = [f"{_open_files_text(own[0])} in the training process"] if own else []
        worker = _nearest_limit(workers)
        if worker is not None:
            parts.append(f"its workers at most {_open_files_text(worker)} (pid {worker.pid})")
        finding = Finding(
            "open files" if alone else f"open files {_who(process)}",
            status,
            nearest.open_files,
            expected,
            display="; ".join(parts),
            remedy=_open_files_remedy(bool(workers)) if status != Status.PASS else "",
        )
        (calm if status == Status.PASS else findings).append((fraction, finding))
    if findings:
        return [f for _, f in findings]
    if not calm:
        return []
    # nothing near its limit: one finding, the process nearest it
    _, nearest_finding = max(calm, key=lambda pair: pair[0])
    if not alone:
        who = nearest_finding.name.removeprefix("open files ")
        nearest_finding.name = "open files"
        nearest_finding.display = f"{who}: {nearest_finding.display}"
    return [nearest_finding]


def cpu_list(cpus: list[int]) -> str:
    """0-3,8 for [0, 1, 2, 3, 8]."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _sharing_groups(processes: list[dict], uses: dict[int, ProcessUse]) -> list[list[dict]]:
    """Training processes whose CPU affinities overlap (directly or through another), each
    group in the order given; processes whose affinity was not read are left out."""
    groups: list[tuple[set[int], list[dict]]] = []
    for process in processes:
        use = uses.get(process["pid"])
        if use is None or not use.affinity:
            continue
        cpus, members = set(use.affinity), [process]
        for group in [g for g in groups if g[0] & cpus]:
            groups.remove(group)
            cpus |= group[0]
            members = group[1] + members
        groups.append((cpus, members))
    return [members for _, members in groups]


def _cpu_findings(processes: list[dict], uses: dict[int, ProcessUse]) -> list[Finding]:
    alone = _alone(processes)
    findings, calm = [], []
    for group in _sharing_groups(processes, uses):
        cpus = sorted({c for p in group for c in uses[p["pid"]].affinity})
        workers = _workers_at_once(group, uses)
        over = workers > len(cpus)
        named = "" if alone else ", ".join(_who(p) for p in group)
        shared = " shared by" if len(group) > 1 else " for"
        display = f"{len(cpus)} ({cpu_list(cpus)}){shared} {workers} DataLoader workers at once"
        if named and not over:
            display = f"{named}: {display}"
        per_rank = len(cpus) // len(group)
        finding = Finding(
            f"CPUs {named}" if named and over else "CPUs",
            Status.WARN if over else Status.PASS,
            workers,
            f"<= {len(cpus)} workers (the CPUs in the processes' affinity)",
            display=display,
            remedy=f"DataLoader(num_workers={per_rank}) or fewer "
            + ("per rank sharing these CPUs " if len(group) > 1 else "")
            + "(PyTorch warns above the CPUs a process may run on), or give the job more CPUs "
            "(Slurm --cpus-per-task, taskset -c, the container's cpuset)"
            if over
            else "",
        )
        (findings if over else calm).append((workers / len(cpus), finding))
    if findings:
        return [f for _, f in findings]
    return [max(calm, key=lambda pair: pair[0])[1]] if calm else []


def findings(processes: list[dict], uses: dict[int, ProcessUse]) -> list[Finding]:
    """The `job` check's findings on the host: open files per training process (its workers
    with it), DataLoader workers against the CPUs each group of ranks may run on."""
    return _open_files_findings(processes, uses) + _cpu_findings(processes, uses)


def read_hint(loader: dict) -> str:
    """A data-wait remedy's addition when the loader's workers read from storage."""
    reads = loader.get("worker_reads")
    if not reads or not reads["storage_bytes"] or not reads["bytes"]:
        return ""
    if reads["storage_bytes"] < STORAGE_SHARE_FOR_HINT * reads["bytes"]:
        return ""
    rate = reads["storage_bytes_per_s"]
    return (
        f"; the workers read {format_size(rate or 0)}/s from storage, not the page cache: "
        "stage the data on local NVMe or in memory (role dataset_staging)"
    )


# --- console ---------------------------------------------------------------------------------


def read_rate_cell(loader: dict) -> str:
    """The table's read/s: what the loader's workers read a second, '-' without a figure."""
    reads = loader.get("worker_reads")
    if not reads or reads["bytes_per_s"] is None:
        return "-"
    return f"{format_size(reads['bytes_per_s'])}"


def _limit_text(peak, limit) -> str:
    return f"{peak} of {limit}" if peak is not None else "not sampled"


def console_lines(section: dict) -> list[str]:
    """One line per training process: open files, CPUs, the workers' reads."""
    lines = []
    for entry in section["ranks"]:
        host = entry.get("host")
        if not host:
            continue
        who = f"rank {entry['rank']}" if entry["rank"] is not None else "the training process"
        parts = [
            f"{who} (pid {entry['pid']}): open files "
            + _limit_text(host["open_files_peak"], host["open_files_limit"])
        ]
        if host["workers_open_files_peak"] is not None:
            parts[-1] += ", its workers at most " + _limit_text(
                host["workers_open_files_peak"], host["workers_open_files_limit"]
            )
        if host["cpu_affinity"]:
            cpus = cpu_list(host["cpu_affinity"])
            parts.append(f"{host['workers_at_once']} workers at once, CPUs {cpus}")
        for loader in entry["loaders"]:
            reads = loader.get("worker_reads")
            if reads and reads["bytes_per_s"] is not None:
                text = (
                    f"loader {loader['index']} workers read {format_size(reads['bytes_per_s'])}/s"
                )
                if reads["storage_bytes_per_s"] is not None:
                    text += f" ({format_size(reads['storage_bytes_per_s'])}/s from storage)"
                parts.append(text)
        lines.append("; ".join(parts))
    return lines
