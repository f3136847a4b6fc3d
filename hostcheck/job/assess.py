"""From what a job run measured to checks, findings and remedies.

One check for how the job ended (`job`), one per DataLoader of each training process
(`job-rank<R>-loader<N>`; `job-pid<P>-loader<N>` for a process without a rank), or one
saying no DataLoader was iterated, then `job-gpu` (hostcheck.job.gpu_use). Data-wait above
the loop check's threshold (`checks.loop.max_data_wait`) fails, as in `hostcheck run`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hostcheck._shared.sizes import format_size
from hostcheck.job import compare, gpu_use, host_use, waits
from hostcheck.job.runner import JobRun
from hostcheck.model import CheckResult, Finding, Status

SHM_WARN_FRACTION = 0.8
MIN_STEADY_BATCHES = 2

# The error a DataLoader raises in the training process -> what fixes it.
_FAILURE_REMEDIES = (
    (
        ("too many open files", "ancdata", "emfile"),
        "the open-files limit is too low for the workers' shared tensors: raise it (role "
        "variables ulimits_nofile_soft, ulimits_nofile_hard)",
    ),
    (
        ("bus error", "sigbus", "shared memory"),
        "/dev/shm is too small for the workers' batches: raise it (role variable shm_size); "
        "a loader needs about num_workers x prefetch_factor x batch bytes per rank",
    ),
    (
        ("killed by signal", "exited unexpectedly"),
        "a DataLoader worker died: see the job's output for its error; out of memory "
        "(fewer num_workers or a smaller prefetch_factor) and /dev/shm (role variable "
        "shm_size) are the usual causes",
    ),
)


@dataclass
class Recommended:
    """This host's measured DataLoader setting (hostcheck.dataloader), for one rank."""

    path: str
    kwargs: dict
    cuda: bool


def remedy_for_failure(text: str) -> str:
    lowered = text.lower()
    for needles, remedy in _FAILURE_REMEDIES:
        if any(needle in lowered for needle in needles):
            return remedy
    return "the job's own error: see its output"


def loader_entry(
    loader: dict,
    cpu_seconds: dict[int, float],
    started_at: float | None = None,
    wait_rules: waits.Rules = waits.DEFAULT_RULES,
) -> dict:
    """A loader as the report shows it: the probe's sums and what follows from them."""
    steady, step = loader["steady_batches"], loader["step_s"]
    wait = loader["data_wait_s"]
    active = None
    if loader["first_iter_at"] is not None and loader["last_batch_at"] is not None:
        active = loader["last_batch_at"] - loader["first_iter_at"]
    read_at_end = loader.get("worker_cpu_s", {})
    worker_cpu = sum(
        max(cpu_seconds.get(pid, 0.0), read_at_end.get(str(pid), 0.0))
        for pid in loader["worker_pids"]
    )
    return {
        "index": loader["index"],
        "created_at": loader["created_at"],
        "settings": dict(loader["settings"]),
        "pin_effective": loader["pin_effective"],
        "pinned_batches": loader["pinned_batches"],
        "iterations": loader["iterations"],
        "batches": loader["batches"],
        "samples": loader["samples"],
        "steady_batches": steady,
        "data_wait_s": round(wait, 6),
        "step_s": round(step, 6),
        "data_wait_fraction": round(wait / step, 6) if step > 0 else None,
        "samples_per_s": round(loader["steady_samples"] / step, 3) if step > 0 else None,
        "compute_s_per_batch": round((step - wait) / steady, 6) if steady else None,
        "startup_s": round(loader["startup_s"], 6),
        "worker_cpu_cores": round(worker_cpu / active, 3) if active and worker_cpu else 0.0,
        "worker_pids": list(loader["worker_pids"]),
        "failure": loader["failure"],
        "waits": waits.loader_waits(loader, started_at, wait_rules),
        "throughput": compare.throughput(loader.get("throughput")),
    }


def rank_entries(run: JobRun, wait_rules: waits.Rules = waits.DEFAULT_RULES) -> list[dict]:
    """One entry per probed process that created a DataLoader, ranks first in order."""
    entries = []
    for process in run.processes:
        entries.append(
            {
                "rank": process.get("rank"),
                "local_rank": process.get("local_rank"),
                "world_size": process.get("world_size"),
                "local_world_size": process.get("local_world_size"),
                "pid": process["pid"],
                "argv": process.get("argv", []),
                "host": host_use.process_entry(process, run.host_use),
                "loaders": [
                    {
                        **loader_entry(lo, run.cpu_seconds, run.started_at, wait_rules),
                        **host_use.loader_fields(lo, run),
                    }
                    for lo in process["loaders"]
                ],
            }
        )
    return sorted(entries, key=lambda e: (e["rank"] is None, e["rank"] or 0, e["pid"]))


def _check_id(entry: dict, loader: dict, alone: bool) -> str:
    """job-loader<N> in a job of one process without a rank, else with rank<R> or pid<P>."""
    if alone:
        return f"job-loader{loader['index']}"
    who = f"rank{entry['rank']}" if entry["rank"] is not None else f"pid{entry['pid']}"
    return f"job-{who}-loader{loader['index']}"


def shown_command(command: list[str], width: int = 48) -> str:
    """The command as a line of the table: the program's name and its arguments, cut."""
    text = " ".join([os.path.basename(command[0]), *command[1:]])
    return text if len(text) <= width else text[: width - 1] + "…"


def ending_check(run: JobRun) -> CheckResult:
    """How the job ended, /dev/shm, and what was left behind."""
    findings = []
    command = shown_command(run.command)
    if not run.started:
        findings.append(
            Finding(
                "command",
                Status.ERROR,
                run.outcome,
                "a command that runs",
                display=f"{run.command[0]}: {run.outcome}",
                remedy="check the command and PATH",
            )
        )
        return CheckResult.from_findings(
            "job", findings, summary=f"{run.command[0]}: {run.outcome}"
        )
    if run.outcome == "completed":
        findings.append(Finding("job", Status.PASS, 0, 0, display="exited with status 0"))
    else:
        how = f"killed by {run.signal}" if run.signal else f"exited with status {run.exit_status}"
        if run.forwarded:
            how += f" ({run.forwarded} sent to hostcheck job was passed to it)"
        failures = [
            lo["failure"] for p in run.processes for lo in p["loaders"] if lo.get("failure")
        ]
        remedy = remedy_for_failure(failures[0] if failures else (run.signal or ""))
        findings.append(Finding("job", Status.FAIL, run.exit_status, 0, display=how, remedy=remedy))
    if run.shm_peak_bytes is not None and run.shm_size_bytes:
        peak, size = run.shm_peak_bytes, run.shm_size_bytes
        high = (run.shm_before_bytes or 0) + peak > SHM_WARN_FRACTION * size
        findings.append(
            Finding(
                "/dev/shm peak",
                Status.WARN if high else Status.PASS,
                peak,
                f"<= {SHM_WARN_FRACTION:.0%} of {format_size(size)}",
                display=f"{format_size(peak)} of {format_size(size)}",
                remedy="raise /dev/shm (role variable shm_size)" if high else "",
            )
        )
    findings += host_use.findings(run.processes, run.host_use)
    if run.left_behind:
        findings.append(
            Finding(
                "left behind",
                Status.WARN,
                len(run.left_behind),
                0,
                display=f"{len(run.left_behind)} processes still running after the job ended "
                f"were stopped (pids {', '.join(map(str, run.left_behind[:8]))})",
            )
        )
    if run.unreadable:
        findings.append(
            Finding(
                "probe files",
                Status.ERROR,
                len(run.unreadable),
                0,
                display="; ".join(run.unreadable),
            )
        )
    result = CheckResult.from_findings("job", findings)
    result.summary = f"{command}: " + result.summary
    return result


def _compare(settings: dict, recommended: Recommended | None) -> list[Finding]:
    if recommended is None:
        return []
    findings = []
    want = recommended.kwargs
    for key in ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory"):
        if key not in want:
            continue
        if key == "pin_memory" and not recommended.cuda:
            continue  # pinning does nothing without a GPU
        if key in ("prefetch_factor", "persistent_workers") and not settings["num_workers"]:
            continue
        used = settings.get(key)
        if used == want[key]:
            continue
        findings.append(
            Finding(
                key,
                Status.WARN,
                used,
                want[key],
                display=f"{used} (this host measured {want[key]})",
                source=recommended.path,
                remedy=f"DataLoader({key}={want[key]}) or **hostcheck.dataloader.settings()",
            )
        )
    return findings


def _wait_remedy(settings: dict, recommended: Recommended | None, cpu_cores: float) -> str:
    workers = settings["num_workers"]
    if recommended and recommended.kwargs.get("num_workers", 0) > workers:
        return (
            f"num_workers={recommended.kwargs['num_workers']} (this host's measured setting, "
            "hostcheck.dataloader.settings())"
        )
    if workers == 0:
        return "num_workers > 0: load batches in worker processes while the step runs"
    if workers and cpu_cores >= 0.9 * workers:
        return (
            "the workers are busy all the time: more num_workers if cores are free, cheaper "
            "transforms or pillow-simd (role pillow_simd), data on local NVMe (role "
            "dataset_staging)"
        )
    return "a larger prefetch_factor, or data on faster storage (role dataset_staging)"


def loader_check(
    entry: dict,
    loader: dict,
    max_wait: float,
    recommended: Recommended | None,
    alone: bool = False,
    wait_rules: waits.Rules = waits.DEFAULT_RULES,
) -> CheckResult:
    settings = loader["settings"]
    findings = []
    if loader["failure"]:
        findings.append(
            Finding(
                "failure",
                Status.FAIL,
                loader["failure"],
                None,
                display=loader["failure"],
                remedy=remedy_for_failure(loader["failure"]),
            )
        )
    fraction = loader["data_wait_fraction"]
    if loader["steady_batches"] < MIN_STEADY_BATCHES or fraction is None:
        findings.append(
            Finding(
                "data-wait",
                Status.WARN,
                None,
                f"<= {max_wait:.0%}",
                display=f"not measured: {loader['batches']} batches, "
                f"{loader['steady_batches']} after each epoch's first",
                remedy="run the job for more batches",
            )
        )
    else:
        bad = fraction > max_wait
        findings.append(
            Finding(
                "data-wait",
                Status.FAIL if bad else Status.PASS,
                fraction,
                f"<= {max_wait:.0%}",
                display=f"{fraction:.1%} of step time",
                remedy=_wait_remedy(settings, recommended, loader["worker_cpu_cores"])
                + host_use.read_hint(loader)
                if bad
                else "",
            )
        )
    findings += waits.stall_findings(loader["waits"], wait_rules)
    findings += _compare(settings, recommended)
    if settings["num_workers"] and not settings["persistent_workers"] and loader["iterations"] > 1:
        findings.append(
            Finding(
                "persistent_workers",
                Status.WARN,
                False,
                True,
                display=f"False: workers started {loader['iterations']} times, "
                f"{loader['startup_s']:.2f} s waiting for first batches",
                remedy="DataLoader(persistent_workers=True)",
            )
        )
    if loader["pinned_batches"] is False:
        findings.append(
            Finding(
                "pinned",
                Status.WARN,
                False,
                True,
                display="batches arrive in pageable memory",
                remedy="DataLoader(pin_memory=True) and .to(device, non_blocking=True)",
            )
        )
    result = CheckResult.from_findings(_check_id(entry, loader, alone), findings, data=dict(loader))
    shown = (
        f"{loader['samples_per_s']:.0f} samples/s, data-wait {fraction:.1%}"
        if fraction is not None
        else f"{loader['batches']} batches"
    )
    bad = [f for f in findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]
    extra = "; ".join(f"{f.name} {f.display}" for f in bad if f.name != "data-wait")
    result.summary = f"{loader['created_at']}: {shown}" + (f"; {extra}" if extra else "")
    return result


def checks(
    run: JobRun,
    max_wait: float,
    recommended: Recommended | None,
    min_gpu_utilization: float,
    wait_rules: waits.Rules = waits.DEFAULT_RULES,
) -> list[CheckResult]:
    results = [ending_check(run)]
    if not run.started:
        return results
    entries = rank_entries(run, wait_rules)
    iterated = [(e, lo) for e in entries for lo in e["loaders"] if lo["iterations"]]
    if not iterated:
        created = [lo["created_at"] for e in entries for lo in e["loaders"]]
        summary = "no DataLoader iterated" + (
            f" (created at {', '.join(created)}, never iterated)" if created else ""
        )
        results.append(
            CheckResult(
                "job-dataloader",
                Status.FAIL,
                summary,
                expected="a DataLoader iterated by the job",
                remedy="hostcheck job measures torch.utils.data.DataLoader iteration: run a "
                "job that trains with one",
            )
        )
        return results
    alone = len(entries) == 1 and entries[0]["rank"] is None
    loader_results = [
        loader_check(e, lo, max_wait, recommended, alone, wait_rules) for e, lo in iterated
    ]
    results += loader_results
    results += waits.rank_skew_checks(entries, wait_rules)
    by_pid = [(e["pid"], result) for (e, _), result in zip(iterated, loader_results)]
    results.append(gpu_use.check(run.gpu, run.processes, by_pid, min_gpu_utilization))
    return results


def job_section(
    run: JobRun, recommended: Recommended | None, wait_rules: waits.Rules = waits.DEFAULT_RULES
) -> dict:
    entries = rank_entries(run, wait_rules)
    return {
        "command": list(run.command),
        "outcome": run.outcome,
        "exit_status": run.exit_status,
        "signal": run.signal,
        "forwarded_signal": run.forwarded,
        "duration_s": round(run.duration_s, 3),
        "started_at": run.started_at,
        "shm_before_bytes": run.shm_before_bytes,
        "shm_peak_bytes": run.shm_peak_bytes,
        "shm_size_bytes": run.shm_size_bytes,
        "left_behind": list(run.left_behind),
        "recommendation": None
        if recommended is None
        else {"path": recommended.path, "dataloader": recommended.kwargs},
        "ranks": entries,
        "rank_skew": waits.rank_skew(entries),
        "gpu": gpu_use.section(run.gpu, run.processes),
    }
