"""`hostcheck job` on real DataLoader jobs: the wait of each batch, a stall with when it
happened, and the slowest of two ranks (hostcheck/job/waits.py).

The costs are sleeps, which a busy machine can only stretch: a stall of seconds stays a
stall, and a rank whose samples cost 40 times more stays the slowest. The stall floor is
raised (`job.stall_min_wait`) so that the hiccups of a loaded two-core machine are never taken
for the stall the test injects: mostly tens of milliseconds, but a batch of 8 ms of work once
waited 1.64 s in a full suite run (load 8 on two cores), which a floor of 0.5 s counted as a
second stall. The floor is 3 s and the injected stalls 5 s.

Two ranks loading alike are the one case a busy machine can spoil: a rank kept off the CPU
waits longer than the other (a full suite run at its end, three workers running PyTorch jobs
on two cores, measured a skew of 0.17 between ranks of the same 1 ms samples). The jobs run in
a session of their own with a larger CPU share (tests/jobs/isolated.py), and a skew over the
limit only while other tasks waited for a CPU most of the run (/proc/pressure/cpu) measured the
machine, not the job: that test then skips and says so, as test_command_scripts.py does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="hostcheck job's tests run PyTorch jobs")

from tests.jobs.scripts import JOBS, REPO, TORCHRUN, environment, isolated
from tests.support.cpu_pressure import SPOILED_PRESSURE, cpu_pressure, pressure_since
from tests.support.job_runs import JOB_RUN_COVERS, checks_by_id, hostcheck_job, job_argv, loaders

# Out of the gate: it runs real training jobs and measures them against arithmetic (minutes
# of CPU); tests/selection.py runs it when these paths change, make test-all always.
COVERS = JOB_RUN_COVERS

STALL_S = 5.0
FLOOR_S = 3.0
FLOOR = ("--set", f"job.stall_min_wait={FLOOR_S}")
SLACK_S = 0.05  # rounding of the report's times (ms) and the probe's clock conversion


def two_ranks(tmp_path: Path, *flags: str, options: tuple[str, ...] = ()) -> tuple[int, dict]:
    """tests/jobs/rank_waits.py on two ranks (torchrun) under hostcheck job."""
    report = tmp_path / "report.json"
    command = [TORCHRUN, "--standalone", "--nproc-per-node", "2", str(JOBS / "rank_waits.py")]
    done = isolated(
        [*job_argv(report, *options), "--", *command, *flags],
        environment(path=REPO),
        timeout=600,
        cwd=tmp_path,
    )
    assert report.is_file(), f"no report (exit {done.returncode}): {done.stderr[-3000:]}"
    document = json.loads(report.read_text())
    assert document["job"]["outcome"] == "completed", done.stderr[-3000:]
    return done.returncode, document


def rank_loader(document: dict, rank: int) -> dict:
    (entry,) = [e for e in document["job"]["ranks"] if e["rank"] == rank]
    (loader,) = entry["loaders"]
    return loader


def test_a_stall_in_one_rank_is_found_there_with_its_time(tmp_path):
    """Rank 1 sleeps 2 s more loading sample 41 (batch 11 of 4 samples), once; no workers,
    so the sleep happens inside the batch's wait: it began after the wait began and before
    it ended. Rank 0 meanwhile waits in the all-reduce, in its step: no stall there."""
    stall_file = tmp_path / "stall.json"
    _, document = two_ranks(
        tmp_path,
        "--epochs",
        "2",
        "--stall",
        f"1:41:{STALL_S}",
        "--stall-file",
        str(stall_file),
        options=FLOOR,
    )
    stalled = json.loads(stall_file.read_text())
    started = document["job"]["started_at"]
    waits = rank_loader(document, 1)["waits"]
    assert waits["batches"] == rank_loader(document, 1)["steady_batches"] == 30
    assert waits["stall_count"] == 1
    (stall,) = waits["stalls"]
    assert (stall["iteration"], stall["batch"]) == (stalled["epoch"], 11)
    assert stall["wait_s"] >= STALL_S and waits["worst_s"] == stall["wait_s"]
    began = stalled["began"] - started
    assert stall["at_s"] - SLACK_S <= began <= stall["at_s"] + stall["wait_s"] + SLACK_S
    floor = max(FLOOR_S, rank_loader(document, 1)["compute_s_per_batch"])
    assert waits["stall_threshold_s"] == pytest.approx(max(5 * waits["median_s"], floor), abs=1e-5)

    assert rank_loader(document, 0)["waits"]["stall_count"] == 0
    assert rank_loader(document, 0)["waits"]["stalls"] == []
    checks = checks_by_id(document)
    (finding,) = [f for f in checks["job-rank1-loader1"]["findings"] if f["name"] == "stalls"]
    assert (finding["status"], finding["measured"]) == ("warn", 1)
    assert f"at {stall['at_s']:.1f} s into the job" in finding["display"]
    assert "batch 11" in finding["display"] and finding["remedy"]
    assert not [f for f in checks["job-rank0-loader1"]["findings"] if f["name"] == "stalls"]


def test_a_stall_in_a_worker_is_found_at_its_batch(tmp_path):
    """One process, two workers: sample 45 (batch 12) sleeps 5 s once in a worker. The
    worker may start it before the training process asks for batch 12, but the batch
    cannot arrive before the sleep ends: the sleep began by the wait's end minus 5 s."""
    _, document, err = hostcheck_job(
        tmp_path,
        f"""
        import json
        class Stalling(Slow):
            def __getitem__(self, i):
                if i == 45:
                    json.dump({{"began": time.time()}}, open("stall.json", "w"))
                    time.sleep({STALL_S})
                return super().__getitem__(i)
        loader = DataLoader(Stalling(4 * 20, 0.002), batch_size=4, num_workers=2)
        for x, y in loader:
            time.sleep(0.02)
        """,
        *FLOOR,
        timeout=600,
    )
    (loader,) = loaders(document)
    waits = loader["waits"]
    assert (waits["stall_count"], len(waits["stalls"])) == (1, 1), err
    (stall,) = waits["stalls"]
    assert (stall["iteration"], stall["batch"]) == (1, 12)
    assert stall["wait_s"] == waits["worst_s"] >= FLOOR_S
    stalled = json.loads((tmp_path / "stall.json").read_text())
    began = stalled["began"] - document["job"]["started_at"]
    assert stall["at_s"] - STALL_S <= began <= stall["at_s"] + stall["wait_s"] - STALL_S + SLACK_S
    check = checks_by_id(document)["job-loader1"]
    (finding,) = [f for f in check["findings"] if f["name"] == "stalls"]
    assert (finding["status"], finding["measured"]) == ("warn", 1)
    assert "job-rank-skew" not in checks_by_id(document)  # one process: no ranks to compare
    assert document["job"]["rank_skew"] is None


def test_a_rank_whose_samples_cost_more_fails_the_rank_skew(tmp_path):
    """One worker per rank; rank 1's samples take 100 ms (400 ms a batch of 4), rank 0's 1 ms,
    steps of 50 ms: rank 1 waits about 350 ms a step and rank 0 waits for it in the
    all-reduce, so rank 1's extra wait is most of the step (10 % fails). The gap is wide so
    that a loaded machine, starving rank 0's worker for a while, cannot turn it round (at 40 ms
    samples rank 0 once waited more, at the end of a full run)."""
    code, document = two_ranks(
        tmp_path, "--sample-ms", "1,100", "--workers", "1", "--step-ms", "50"
    )
    skew = document["job"]["rank_skew"]
    assert (skew["slowest_rank"], skew["median_rank"]) == (1, 0)
    assert skew["skew"] > 0.1
    by_rank = {r["rank"]: r for r in skew["ranks"]}
    assert by_rank[1]["data_wait_s_per_step"] > by_rank[0]["data_wait_s_per_step"]
    check = checks_by_id(document)["job-rank-skew"]
    assert check["status"] == "fail" and "rank 1" in check["remedy"]
    assert code == 1


def test_ranks_loading_alike_pass_the_rank_skew(tmp_path):
    """Both ranks' samples take 1 ms with one worker each and 100 ms steps: neither waits
    beyond the hand-over of a batch, over 32 steady batches."""
    began = cpu_pressure()
    _, document = two_ranks(
        tmp_path,
        "--sample-ms",
        "1,1",
        "--workers",
        "1",
        "--step-ms",
        "100",
        "--samples",
        str(4 * 33),
    )
    pressure = pressure_since(began)
    skew = document["job"]["rank_skew"]
    if skew["skew"] > 0.1 and pressure is not None and pressure > SPOILED_PRESSURE:
        pytest.skip(
            f"other load kept tasks waiting for a CPU {pressure:.0%} of the run: "
            f"skew {skew['skew']:.3f} timed the machine, not the job ({skew})"
        )
    assert skew["skew"] <= 0.1, (skew, pressure)
    check = checks_by_id(document)["job-rank-skew"]
    assert check["status"] == "pass", check
    assert [f["name"] for f in check["findings"]] == ["rank skew"]
