"""The data-wait's distribution in a job: per loader, the median, p95 and worst wait per
batch and its stalls (waits far above the median, with when they happened); per job, the
slowest rank against the median rank (rank skew).

The probe records every steady batch's wait (hostcheck/job/inject/_hostcheck_job_probe.py,
`waits` of each loader): the first thousands exactly, then as counts in log-spaced bins,
and always the worst few with their wall-clock times. Settings: the profile's `job` section.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from hostcheck.model import CheckResult, Finding, Status

MIN_STEADY_BATCHES = 2  # a rank with fewer is not compared (assess.MIN_STEADY_BATCHES)
RANK_SKEW_CHECK = "job-rank-skew"


@dataclass(frozen=True)
class Rules:
    """The profile's `job` section."""

    stall_factor: float = 5.0  # a wait above this many times the loader's median is a stall
    stall_min_wait_s: float = 0.05  # ... when it is also above this (microsecond medians)
    max_rank_skew: float = 0.1  # slowest rank's extra wait per step over the step: more fails

    @classmethod
    def from_profile(cls, values: Mapping) -> Rules:
        job = values["job"]
        return cls(
            stall_factor=float(job["stall_factor"]),
            stall_min_wait_s=float(job["stall_min_wait"]),
            max_rank_skew=float(job["max_rank_skew"]),
        )


DEFAULT_RULES = Rules()


def percentile(ordered: list[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, interpolated between the two nearest."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def binned_percentile(counts: list[int], lowest_s: float, per_decade: int, q: float) -> float:
    """The q-quantile of values counted in log-spaced bins (bin i holds lowest_s x
    10^(i/per_decade) up to the next edge): the geometric middle of the bin it falls in."""
    target = q * (sum(counts) - 1)
    seen = 0
    for index, count in enumerate(counts):
        seen += count
        if seen > target:
            return lowest_s * 10 ** ((index + 0.5) / per_decade)
    raise ValueError("no values counted")


def _above_in_bins(bins: dict, threshold_s: float) -> int:
    """Values counted in bins whose middle is above threshold_s."""
    lowest, per_decade = bins["lowest_s"], bins["per_decade"]
    return sum(
        count
        for index, count in enumerate(bins["counts"])
        if count and lowest * 10 ** ((index + 0.5) / per_decade) > threshold_s
    )


def loader_waits(loader: dict, started_at: float | None, rules: Rules) -> dict | None:
    """A loader's `waits` as the report gives it, from what the probe wrote of the loader
    (None when it recorded no wait: no steady batch, or a probe without them)."""
    recorded = loader.get("waits")
    if not recorded or not recorded.get("count"):
        return None
    exact = recorded.get("exact_us")
    bins = recorded.get("bins")
    worst = recorded["worst"]
    if exact is not None:
        ordered = sorted(micros / 1e6 for micros in exact)
        median, p95 = percentile(ordered, 0.5), percentile(ordered, 0.95)
    else:
        quantile = [bins["counts"], bins["lowest_s"], bins["per_decade"]]
        median, p95 = (binned_percentile(*quantile, q) for q in (0.5, 0.95))
    steady = loader["steady_batches"]
    compute = (loader["step_s"] - loader["data_wait_s"]) / steady if steady else 0.0
    # a stall holds the loop up for longer than a step's own work: shorter hiccups of a busy
    # machine are not stalls, however far above a median of microseconds
    threshold = max(rules.stall_factor * median, rules.stall_min_wait_s, compute)
    stalls = [w for w in worst if w["wait_s"] > threshold]
    count = len(stalls)
    if stalls and len(stalls) == len(worst):  # the worst list may not hold them all
        above = (
            sum(1 for micros in exact if micros / 1e6 > threshold)
            if exact is not None
            else _above_in_bins(bins, threshold)
        )
        count = max(count, above)
    return {
        "batches": recorded["count"],
        "exact": exact is not None,
        "median_s": round(median, 6),
        "p95_s": round(p95, 6),
        "worst_s": worst[0]["wait_s"],
        "stall_threshold_s": round(threshold, 6),
        "stall_count": count,
        "stalls": [
            {
                "at_s": None if started_at is None else round(w["at"] - started_at, 3),
                "wait_s": w["wait_s"],
                "iteration": w["iteration"],
                "batch": w["batch"],
            }
            for w in sorted(stalls, key=lambda w: w["at"])
        ],
    }


def short_seconds(seconds: float | None) -> str:
    """12us, 3.4ms, 250ms, 1.20s: a wait as the table shows it."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 0.01:
        return f"{seconds * 1e3:.1f}ms"
    if seconds < 1:
        return f"{seconds * 1e3:.0f}ms"
    return f"{seconds:.2f}s"


def stall_findings(waits: dict | None, rules: Rules) -> list[Finding]:
    """A warning for a loader whose batches stalled: how many, the worst, and when."""
    if not waits or not waits["stall_count"]:
        return []
    worst = max(waits["stalls"], key=lambda s: s["wait_s"])
    when = "" if worst["at_s"] is None else f" at {worst['at_s']:.1f} s into the job"
    count = waits["stall_count"]
    return [
        Finding(
            "stalls",
            Status.WARN,
            count,
            f"no wait above {rules.stall_factor:g} x the median "
            f"({short_seconds(waits['stall_threshold_s'])})",
            display=f"{count} of {waits['batches']} batches waited more than "
            f"{short_seconds(waits['stall_threshold_s'])} ({rules.stall_factor:g} x the median "
            f"{short_seconds(waits['median_s'])}); worst {short_seconds(worst['wait_s'])}{when}, "
            f"iteration {worst['iteration']} batch {worst['batch']}",
            remedy="stalls are batches the workers could not make in time: slow reads (data on "
            "network or cold storage: role dataset_staging), pauses in a worker or in training "
            "(garbage collection, checkpoints); a larger prefetch_factor or more num_workers "
            "ride out short ones",
        )
    ]


def _per_rank(entries: list[dict]) -> list[dict]:
    """Each rank's data-wait and step per steady batch, over its loaders."""
    ranks = []
    for entry in entries:
        if entry["rank"] is None:
            continue
        batches = sum(lo["steady_batches"] for lo in entry["loaders"])
        if batches < MIN_STEADY_BATCHES:
            continue
        ranks.append(
            {
                "rank": entry["rank"],
                "data_wait_s_per_step": round(
                    sum(lo["data_wait_s"] for lo in entry["loaders"]) / batches, 6
                ),
                "step_s": round(sum(lo["step_s"] for lo in entry["loaders"]) / batches, 6),
            }
        )
    return ranks


def rank_skew(entries: list[dict]) -> dict | None:
    """The slowest rank (most data-wait per step) against the median rank (the lower
    middle, so it is one of the job's ranks): its extra wait per step as a share of the
    median rank's step, which every rank of a synchronous job spends waiting for it. None
    for a job of fewer than two ranks."""
    ranks = _per_rank(entries)
    if len(ranks) < 2:
        return None
    ordered = sorted(ranks, key=lambda r: (r["data_wait_s_per_step"], r["rank"]))
    slowest, median = ordered[-1], ordered[(len(ordered) - 1) // 2]
    extra = slowest["data_wait_s_per_step"] - median["data_wait_s_per_step"]
    return {
        "skew": round(extra / median["step_s"], 6) if median["step_s"] > 0 else None,
        "slowest_rank": slowest["rank"],
        "median_rank": median["rank"],
        "ranks": sorted(ranks, key=lambda r: r["rank"]),
    }


def rank_skew_checks(entries: list[dict], rules: Rules) -> list[CheckResult]:
    """`job-rank-skew` for a job of two ranks or more: fails when the slowest rank waits
    for data more than max_rank_skew of a step beyond the median rank."""
    skew = rank_skew(entries)
    if skew is None or skew["skew"] is None:
        return []
    by_rank = {r["rank"]: r for r in skew["ranks"]}
    slowest, median = by_rank[skew["slowest_rank"]], by_rank[skew["median_rank"]]
    bad = skew["skew"] > rules.max_rank_skew
    finding = Finding(
        "rank skew",
        Status.FAIL if bad else Status.PASS,
        skew["skew"],
        f"<= {rules.max_rank_skew:.0%}",
        display=f"rank {slowest['rank']} waits {short_seconds(slowest['data_wait_s_per_step'])}"
        f" a step for data, the median rank {median['rank']} "
        f"{short_seconds(median['data_wait_s_per_step'])}: {skew['skew']:.1%} of its "
        f"{short_seconds(median['step_s'])} step",
        remedy=f"one starved rank holds every rank of a synchronous job back: compare rank "
        f"{slowest['rank']} with the others: its DataLoader settings (num_workers), its shard "
        "of the data (larger samples, files on slower storage: role dataset_staging), the "
        "CPUs and host it runs on (hostcheck run on its node)"
        if bad
        else "",
    )
    return [CheckResult.from_findings(RANK_SKEW_CHECK, [finding], data=skew)]
