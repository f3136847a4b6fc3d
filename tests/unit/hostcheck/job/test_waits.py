"""The data-wait's distribution (hostcheck/job/waits.py) from what the probe records
(_Waits of hostcheck/job/inject/_hostcheck_job_probe.py): percentiles, exact and from the
log-spaced bins, the memory and file size they keep bounded, stalls with their times, rank
skew, and the profile's `job` section."""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys

import pytest

from hostcheck import config
from hostcheck.commands.common import profile_schema
from hostcheck.job import waits
from hostcheck.job.inject._hostcheck_job_probe import _WALL_MINUS_PERF, _Waits
from hostcheck.model import Status

RULES = waits.Rules(stall_factor=5, stall_min_wait_s=0.05, max_rank_skew=0.1)


def recorded(values: list[float], began=None, compute_s: float = 0.0) -> dict:
    """What the probe writes of a loader whose steady batches waited these and computed
    compute_s each; batch i began at began(i) (perf_counter)."""
    recorder = _Waits()
    for index, wait in enumerate(values):
        recorder.add(wait, began(index) if began else float(index), 1, index + 1)
    return {
        "steady_batches": len(values),
        "data_wait_s": sum(values),
        "step_s": sum(values) + compute_s * len(values),
        "waits": json.loads(json.dumps(recorder.to_dict())),
    }


def test_percentile_interpolates_between_the_nearest_values():
    assert waits.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert waits.percentile([0.0, 10.0], 0.95) == pytest.approx(9.5)
    assert waits.percentile([7.0], 0.95) == 7.0
    assert waits.percentile(list(range(101)), 0.95) == 95


def test_binned_percentile_is_the_middle_of_the_bin_it_falls_in():
    # 10 bins a decade from 1 s: bin 0 is [1, 1.26), bin 3 is [2.0, 2.5)
    counts = [0, 0, 0, 5, 0, 1]
    assert waits.binned_percentile(counts, 1.0, 10, 0.5) == pytest.approx(10**0.35)
    assert waits.binned_percentile(counts, 1.0, 10, 1.0) == pytest.approx(10**0.55)


def test_few_waits_are_kept_exactly():
    values = [0.010, 0.012, 0.011, 0.200, 0.013]
    result = waits.loader_waits(recorded(values), None, RULES)
    assert result["exact"] is True and result["batches"] == 5
    assert result["median_s"] == pytest.approx(0.012)
    assert result["p95_s"] == pytest.approx(waits.percentile(sorted(values), 0.95), abs=2e-6)
    assert result["worst_s"] == 0.2


def test_many_waits_keep_median_and_p95_within_3_percent_in_bounded_memory_and_file():
    generator = random.Random(29)
    values = [generator.lognormvariate(-5, 0.6) for _ in range(100_000)]
    recorder = _Waits()
    for index, wait in enumerate(values):
        recorder.add(wait, float(index), 1, index + 1)
    assert recorder.exact is None and len(recorder.bins) == _Waits.BINS
    assert len(recorder.worst) == _Waits.WORST
    text = json.dumps(recorder.to_dict())
    assert len(text) < 6000  # what the probe rewrites every second, whatever the batches
    loader = {"steady_batches": len(values), "data_wait_s": sum(values), "step_s": sum(values)}
    result = waits.loader_waits({**loader, "waits": json.loads(text)}, None, RULES)
    ordered = sorted(values)
    assert result["exact"] is False and result["batches"] == 100_000
    assert result["median_s"] == pytest.approx(statistics.median(values), rel=0.03)
    assert result["p95_s"] == pytest.approx(waits.percentile(ordered, 0.95), rel=0.03)
    assert result["worst_s"] == round(ordered[-1], 6)


def test_the_bins_run_from_1_us_to_1000_s_40_a_decade():
    recorder = _Waits()
    assert 10**_Waits.LOG10_LOWEST == _Waits.LOWEST_S
    assert [recorder._bin(s) for s in (1e-7, 1e-6, 1.1e-6, 1e-3, 1.0, 999.0, 1e4)] == [
        0,
        0,
        1,
        120,
        240,
        359,
        359,
    ]


def test_the_exact_list_stops_at_its_limit():
    recorder = _Waits()
    for index in range(_Waits.EXACT - 1):
        recorder.add(0.001, float(index), 1, index + 1)
    assert len(recorder.exact) == _Waits.EXACT - 1
    recorder.add(0.001, 0.0, 1, _Waits.EXACT)
    assert recorder.exact is None and sum(recorder.bins) == _Waits.EXACT


def test_stalls_are_waits_above_the_factor_times_the_median_with_their_times():
    values = [0.010] * 200
    for index, wait in ((50, 0.8), (120, 0.06), (180, 0.049)):
        values[index] = wait
    started = 1_000.0 + _WALL_MINUS_PERF  # the job began at perf_counter 1000
    result = waits.loader_waits(recorded(values, lambda i: 1_000.0 + i / 10), started, RULES)
    assert result["stall_threshold_s"] == 0.05  # 5 x 10 ms
    assert result["stall_count"] == 2
    assert result["stalls"] == [
        {"at_s": 5.0, "wait_s": 0.8, "iteration": 1, "batch": 51},
        {"at_s": 12.0, "wait_s": 0.06, "iteration": 1, "batch": 121},
    ]
    (finding,) = waits.stall_findings(result, RULES)
    assert (finding.status, finding.measured) == (Status.WARN, 2)
    assert "2 of 200 batches" in finding.display
    assert "worst 800ms at 5.0 s into the job, iteration 1 batch 51" in finding.display


def test_microsecond_medians_make_no_stalls_below_the_floor():
    values = [20e-6] * 500 + [0.004, 0.02]  # 200 and 1000 times the median, under 50 ms
    result = waits.loader_waits(recorded(values), None, RULES)
    assert result["stall_threshold_s"] == 0.05
    assert (result["stall_count"], result["stalls"]) == (0, [])
    assert waits.stall_findings(result, RULES) == []


@pytest.mark.parametrize("batches", [2_000, 50_000])  # exact, then binned
def test_more_stalls_than_the_worst_list_are_counted_and_the_worst_listed(batches):
    values = [0.010] * batches
    for index in range(0, batches, batches // 100):
        values[index] = 1.0
    result = waits.loader_waits(recorded(values), 0.0, RULES)
    assert result["stall_count"] == 100
    assert len(result["stalls"]) == _Waits.WORST
    assert [s["at_s"] for s in result["stalls"]] == sorted(s["at_s"] for s in result["stalls"])


def test_a_wait_shorter_than_a_steps_compute_is_no_stall():
    """Steps of 150 ms: a hiccup of 100 ms (10 times the median) is no stall, 200 ms is."""
    values = [0.010] * 100
    values[30], values[60] = 0.1, 0.2
    result = waits.loader_waits(recorded(values, compute_s=0.15), 0.0, RULES)
    assert result["stall_threshold_s"] == pytest.approx(0.15)
    assert [s["batch"] for s in result["stalls"]] == [61]


def test_a_loader_without_steady_batches_has_no_waits():
    empty = {"steady_batches": 0, "data_wait_s": 0.0, "step_s": 0.0}
    assert waits.loader_waits({**empty, "waits": None}, None, RULES) is None
    assert waits.loader_waits({**empty, "waits": _Waits().to_dict()}, None, RULES) is None
    assert waits.loader_waits(empty, None, RULES) is None  # a probe of before the waits
    assert waits.stall_findings(None, RULES) == []


def entry(rank, wait_s, step_s, batches=10):
    loader = {
        "steady_batches": batches,
        "data_wait_s": wait_s * batches,
        "step_s": step_s * batches,
    }
    return {"rank": rank, "loaders": [loader]}


def test_rank_skew_is_the_slowest_ranks_extra_wait_over_the_median_ranks_step():
    entries = [entry(0, 0.010, 0.2), entry(1, 0.090, 0.2), entry(2, 0.020, 0.2), entry(3, 0.0, 0.2)]
    skew = waits.rank_skew(entries)
    # by wait: 3 (0), 0 (10 ms), 2 (20 ms), 1 (90 ms); the lower middle is rank 0
    assert (skew["slowest_rank"], skew["median_rank"]) == (1, 0)
    assert skew["skew"] == pytest.approx((0.090 - 0.010) / 0.2)
    assert [r["rank"] for r in skew["ranks"]] == [0, 1, 2, 3]
    (check,) = waits.rank_skew_checks(entries, RULES)
    assert (check.id, check.status) == ("job-rank-skew", Status.FAIL)
    assert "rank 1 waits 90ms a step" in check.findings[0].display
    assert "rank 1" in check.remedy
    (check,) = waits.rank_skew_checks(entries, waits.Rules(max_rank_skew=0.5))
    assert check.status == Status.PASS and check.remedy == ""


def test_two_ranks_compare_the_slower_with_the_faster():
    skew = waits.rank_skew([entry(0, 0.050, 0.1), entry(1, 0.010, 0.1)])
    assert (skew["slowest_rank"], skew["median_rank"]) == (0, 1)
    assert skew["skew"] == pytest.approx(0.4)


def test_rank_skew_needs_two_ranks_with_steady_batches():
    assert waits.rank_skew([entry(0, 0.05, 0.1)]) is None
    assert waits.rank_skew([entry(None, 0.05, 0.1), entry(None, 0.0, 0.1)]) is None
    assert waits.rank_skew([entry(0, 0.05, 0.1), entry(1, 0.0, 0.1, batches=1)]) is None
    assert waits.rank_skew_checks([entry(0, 0.05, 0.1)], RULES) == []


def test_short_seconds():
    assert [waits.short_seconds(s) for s in (12e-6, 0.0034, 0.25, 1.2, None)] == [
        "12us",
        "3.4ms",
        "250ms",
        "1.20s",
        "-",
    ]


def test_the_profiles_job_section_gives_the_rules():
    schema = profile_schema()
    assert waits.Rules.from_profile(config.load_profile("default", schema).values) == RULES
    changed = config.load_profile(
        "default", schema, assignments=["job.stall_factor=3", "job.max_rank_skew=0.25"]
    )
    rules = waits.Rules.from_profile(changed.values)
    assert (rules.stall_factor, rules.max_rank_skew) == (3, 0.25)


@pytest.mark.parametrize("assignment", ["job.stall_factor=0.5", "job.max_rank_skew=-1"])
def test_a_bad_job_setting_is_a_one_line_usage_error(tmp_path, assignment):
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "job", "--set", assignment, "--", "true"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert assignment.split("=")[0] in line
