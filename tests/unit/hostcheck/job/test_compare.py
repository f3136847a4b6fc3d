"""`hostcheck job --compare OLD.json`: the comparison of two reports and its noise rule on
small documents, a real before/after of num_workers 0 and 2, and a bad OLD.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import resources

import jsonschema
import pytest

from hostcheck.job import compare
from hostcheck.job.inject import _hostcheck_job_probe as probe
from tests.support.job_runs import JOB_RUN_COVERS, LOADER, job_argv
from tests.support.loop_point import raise_share

# Runs real DataLoader jobs (seconds each): out of the gate, chosen when what they cover
# changes (tests/selection.py)
COVERS = JOB_RUN_COVERS


def _throughput(rates: list[float]) -> dict:
    """A loader's throughput of one-second windows at these samples/s."""
    return compare.throughput({"window_s": 1.0, "windows": [[rate, 1.0] for rate in rates]})


def _loader(index=1, num_workers=0, rates=(100.0, 100.0), wait=0.5, created_at="train.py:9"):
    flow = _throughput(list(rates))
    return {
        "index": index,
        "created_at": created_at,
        "settings": {
            "num_workers": num_workers,
            "pin_memory": False,
            "prefetch_factor": 2 if num_workers else None,
            "persistent_workers": False,
            "batch_size": 8,
        },
        "data_wait_fraction": wait,
        "samples_per_s": flow["samples_per_s_mean"],
        "waits": {"median_s": 0.02, "p95_s": 0.03},
        "throughput": flow,
    }


def _report(*loaders, rank=None, gpus=None) -> dict:
    return {
        "job": {
            "command": ["python", "train.py"],
            "ranks": [{"rank": rank, "pid": 1, "loaders": list(loaders)}],
            "gpu": None if gpus is None else {"gpus": gpus},
        }
    }


def test_throughput_is_the_mean_over_windows_with_its_standard_error():
    flow = compare.throughput({"window_s": 1.0, "windows": [[90, 1.0], [110, 1.0], [50, 0.5]]})
    assert flow["samples_per_s_mean"] == 100.0
    # rates 90, 110, 100: standard deviation 10, over sqrt(3)
    assert flow["samples_per_s_stderr"] == pytest.approx(10 / 3**0.5, abs=1e-3)
    assert (
        compare.throughput({"window_s": 1.0, "windows": [[90, 1.0]]})["samples_per_s_stderr"]
        is None
    )
    assert compare.throughput(None) is None


def test_noise_rule_helped_worse_within_noise_at_twice_the_combined_error():
    old = _throughput([95, 105, 95, 105])  # mean 100, standard error 2.887
    verdict, margin = compare.verdict(old, _throughput([105, 115, 105, 115]))
    assert verdict == "helped" and margin == pytest.approx(2 * (2 * 2.887**2) ** 0.5, abs=1e-3)
    assert compare.verdict(old, _throughput([102, 112, 102, 112]))[0] == "within noise"
    assert compare.verdict(old, _throughput([85, 95, 85, 95]))[0] == "worse"
    assert compare.verdict(old, _throughput([88, 98, 88, 98]))[0] == "within noise"
    assert compare.verdict(old, _throughput([300]))[0] == "no noise estimate"
    assert compare.verdict(None, old) == ("no noise estimate", None)


def test_comparison_matches_loaders_by_rank_and_index_and_names_what_changed():
    old = _report(_loader(1, 0, (40, 42, 41), 0.6), _loader(2, 0, created_at="train.py:20"))
    new = _report(
        _loader(1, 4, (80, 81, 79), 0.01),
        _loader(3, 0, created_at="train.py:30"),
        gpus=[{"index": 0, "utilization_mean": 0.9}],
    )
    section = compare.comparison(old, new, "old.json")
    by_index = {entry["index"]: entry for entry in section["loaders"]}
    first = by_index[1]
    assert first["matched"] and first["note"] is None
    assert first["changed"] == {"num_workers": [0, 4], "prefetch_factor": [None, 2]}
    assert first["verdict"] == "helped"
    assert (first["old"]["data_wait_fraction"], first["new"]["data_wait_fraction"]) == (0.6, 0.01)
    assert first["old"]["samples_per_s_mean"] == 41.0 and first["new"]["windows"] == 3
    assert (by_index[2]["matched"], by_index[2]["note"]) == (False, "only in the old run")
    assert (by_index[3]["new"] is not None, by_index[3]["note"]) == (True, "only in the new run")
    assert section["gpus"] == [
        {"index": 0, "old_utilization_mean": None, "new_utilization_mean": 0.9}
    ]


def test_a_loader_created_elsewhere_is_compared_and_said_so():
    old = _report(_loader(1, 2, created_at="train.py:9"))
    new = _report(_loader(1, 2, created_at="train.py:12"))
    (entry,) = compare.comparison(old, new, "old.json")["loaders"]
    assert entry["matched"] and entry["changed"] == {}
    assert entry["note"] == "created at train.py:9 before, train.py:12 now"
    assert entry["verdict"] == "within noise"


def test_other_ranks_do_not_match():
    section = compare.comparison(_report(_loader(), rank=0), _report(_loader(), rank=1), "o")
    assert [(e["rank"], e["matched"]) for e in section["loaders"]] == [(0, False), (1, False)]


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "no such file"), ("{not json", "not JSON"), ('{"checks": []}', "not a hostcheck job")],
)
def test_bad_old_reports_are_named(tmp_path, content, says):
    path = tmp_path / "old.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(compare.CompareFileError) as caught:
        compare.load(str(path))
    assert str(path) in str(caught.value) and says in str(caught.value)


TRAIN = textwrap.dedent(
    """
    workers = int(sys.argv[1])
    loader = DataLoader(Slow(4 * 40, 0.05), batch_size=4, num_workers=workers)
    for x, y in loader:
        time.sleep(0.01)
    """
)


def _run(tmp_path, workers: int, report, *options):
    """train.py with num_workers=workers under hostcheck job, in a session of its own with a
    larger CPU share (as the fed job test runs)."""
    pytest.importorskip("torch", reason="hostcheck job's tests run PyTorch jobs")
    script = tmp_path / "train.py"
    script.write_text(LOADER + TRAIN)
    env = {k: v for k, v in os.environ.items() if k != "HOSTCHECK_DATALOADER"}
    return subprocess.run(
        [*job_argv(report, *options), "--", sys.executable, str(script), str(workers)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env={**env, "COLUMNS": "250"},
        start_new_session=True,
        preexec_fn=raise_share,
    )


def test_two_workers_against_none_helped_beyond_noise(tmp_path):
    """A batch is 4 samples of 50 ms (sleeps), the step 10 ms. Without workers each batch
    takes at least 210 ms: at most 19 samples/s, whatever the load. Two workers make a batch
    each in 200 ms in parallel: 40 samples/s, and still above 25 samples/s with 60 ms of
    hand-over a batch. Sleep-based windows vary little, so the difference is many times the
    noise."""
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    first = _run(tmp_path, 0, before)
    assert first.returncode in (0, 1), first.stderr
    second = _run(tmp_path, 2, after, "--compare", str(before))
    assert second.returncode in (0, 1), second.stderr
    document = json.loads(after.read_text())
    schema = resources.files("hostcheck.report").joinpath("report-v1.json").read_text()
    jsonschema.validate(document, json.loads(schema))
    (entry,) = document["job"]["comparison"]["loaders"]
    assert entry["matched"] and entry["note"] is None
    assert entry["changed"]["num_workers"] == [0, 2]
    assert entry["old"]["samples_per_s_mean"] <= 19.1
    assert entry["new"]["samples_per_s_mean"] > 25
    assert entry["old"]["windows"] >= 6 and entry["new"]["windows"] >= 2
    assert entry["verdict"] == "helped", entry
    assert "num_workers 0 -> 2" in second.stdout and "helped" in second.stdout


def test_bad_old_report_stops_before_the_job_runs(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text('{"verdict": "pass"}')
    completed = subprocess.run(
        [
            *job_argv(tmp_path / "report.json", "--compare", str(bad)),
            "--",
            sys.executable,
            "-c",
            "open('ran', 'w').close()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert completed.returncode == 2
    assert not (tmp_path / "ran").exists() and not (tmp_path / "report.json").exists()
    assert str(bad) in completed.stderr and len(completed.stderr.strip().splitlines()) == 1


def test_a_report_without_windows_is_shown_but_not_judged():
    """A report of an earlier hostcheck, before loaders had `throughput`."""
    old = _loader(1, 0)
    del old["throughput"]
    (entry,) = compare.comparison(_report(old), _report(_loader(1, 2)), "o")["loaders"]
    assert (entry["verdict"], entry["noise_margin"]) == ("no noise estimate", None)
    assert entry["old"]["samples_per_s"] == 100.0 and entry["old"]["windows"] == 0


def test_the_probes_windows_stay_bounded_and_keep_every_sample():
    windows = probe._Windows()
    for _ in range(1000):  # 500 s of steps
        windows.add(10, 0.5)  # two batches a window at first
    recorded = windows.to_dict()
    # 500 s of steps: 256 windows of 1 s merge into 128 of 2 s, then 122 more of 2 s
    assert (recorded["window_s"], len(recorded["windows"])) == (2.0, 250)
    assert sum(samples for samples, _ in recorded["windows"]) == 10 * 1000
    assert sum(step for _, step in recorded["windows"]) == pytest.approx(500.0)
    flow = compare.throughput(recorded)
    assert (flow["samples_per_s_mean"], flow["samples_per_s_stderr"]) == (20.0, 0.0)
