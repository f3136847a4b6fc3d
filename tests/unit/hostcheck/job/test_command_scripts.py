"""`hostcheck job` on real training scripts (tests/jobs/, README.md there): the settings each
DataLoader used, as the report says, and its data-wait against the arithmetic of
hostcheck.loop.theory.predict(cost, batch, workers, step), with the job's own measured
compute per batch as the step and a per-sample cost known beforehand (the sleeps of the seed
article's and the DDP script's datasets) or measured by the test (the ImageFolder samples,
by tests/jobs/sample_cost.py). Within 15 % of the predicted data-wait fraction, relative.

This is a shared 2-core machine. Each measured run (job or cost) runs in a session of its own
with a larger CPU share (tests/jobs/isolated.py; other test modules and sandbox fleets run
beside this one), and a run off the arithmetic is measured again, up to three tries; the
assertion message lists every try. A point off the arithmetic only in tries during which other
tasks waited for a CPU most of the time (/proc/pressure/cpu) measured the machine's load, not
the job: the test skips and says so, as tests/unit/hostcheck/loop/test_theory.py does. The
points are chosen where the arithmetic holds on two cores: sleeping samples (no core used while
loading), or CPU samples with one worker next to a training process of one thread, each on its
own core.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hostcheck import dataloader
from hostcheck.dataloader import writing
from hostcheck.loop import theory
from tests.jobs import imagefolder_tree
from tests.jobs.scripts import (
    CPU_TORCHVISION,
    IMAGE_BATCH,
    IMAGE_EPOCHS,
    JOBS,
    ddp_command,
    environment,
    imagefolder_command,
    imagefolder_environment,
    isolated,
    seed_command,
)
from tests.support.cpu_pressure import SPOILED_PRESSURE, cpu_pressure, pressure_since
from tests.support.job_runs import JOB_RUN_COVERS

# Out of the gate: it runs real training jobs and measures them against arithmetic (minutes
# of CPU); tests/selection.py runs it when these paths change, make test-all always.
COVERS = JOB_RUN_COVERS

TOLERANCE = 0.15
TRIES = 3
# The seed article's two workers sit near the tolerance even alone (11 % off: collating and
# handing over 38 MB batches costs on top of the 5 ms samples), and a third of the suite's load
# (pressure 0.20 to 0.25) put them 95 to 800 % off: its tries count only below this.
SEED_QUIET_PRESSURE = 0.1
# The seed article's experiment: 1024 samples of 5 ms, batch 64.
SEED_COST_S, SEED_BATCH = 0.005, 64
DDP_COST_S, DDP_BATCH = 0.005, 32  # ddp_train.py's defaults: --sample-ms 5, --batch-size 32
# ddp_train.py with one worker a rank that cannot keep up: 800 ms of sleeping samples a batch
# against about 35 ms of step compute, 4 batches a rank and epoch
DDP_STARVED = {"samples": 64, "batch-size": 8, "sample-ms": 100}


def run_job(command: list[str], report: Path, env: dict) -> tuple[dict, int, str]:
    """(the JSON report, hostcheck job's exit code, its stderr's end)."""
    done = isolated(
        [sys.executable, "-m", "hostcheck", "job", "--report", f"json:{report}", "--", *command],
        env,
    )
    assert report.is_file(), f"no report (exit {done.returncode}): {done.stderr[-3000:]}"
    return json.loads(report.read_text()), done.returncode, done.stderr[-3000:]


def loaders_of(document: dict) -> list[tuple[dict, dict]]:
    return [(rank, loader) for rank in document["job"]["ranks"] for loader in rank["loaders"]]


def judge(loader: dict, cost_s: float, batch: int, rank: dict) -> tuple[bool, str]:
    """Within TOLERANCE of the arithmetic, and a line saying how far."""
    workers = loader["settings"]["num_workers"]
    model = theory.predict(cost_s, batch, workers, loader["compute_s_per_batch"])
    measured = loader["data_wait_fraction"]
    off = abs(theory.ratio(measured, model.data_wait_fraction) - 1)
    who = f"rank {rank['rank']} " if rank["rank"] is not None else ""
    return off <= TOLERANCE, (
        f"{who}loader {loader['index']} ({loader['created_at']}, num_workers {workers}): "
        f"data-wait {measured:.3f}, predicted {model.data_wait_fraction:.3f} "
        f"({off:.1%} off) from {cost_s * 1000:.2f} ms a sample and a step of "
        f"{loader['compute_s_per_batch'] * 1000:.1f} ms; {loader['samples_per_s']:.0f} "
        f"samples/s, predicted {model.samples_per_s:.0f}"
    )


def job_run(tmp_path: Path, name: str, command: list[str], env: dict, cost, batch: int):
    """run() for measured_until_close: `command` under hostcheck job, and the cost of a
    sample: a number known beforehand, or a function that measures it (called right before
    each try)."""
    tries = iter(range(TRIES))

    def run():
        cost_s = cost() if callable(cost) else cost
        report = tmp_path / f"{name}-{next(tries)}.json"
        began = cpu_pressure()
        document, code, stderr = run_job(command, report, env)
        pressure = pressure_since(began)
        assert_completed(document, code, stderr)
        return document, cost_s, batch, pressure

    return run


def measured_until_close(
    run, check_settings, spoiled_pressure: float = SPOILED_PRESSURE
) -> tuple[dict, list[str]]:
    """Run (run() -> (report, cost_s, batch, CPU pressure)) up to TRIES times until every
    loader is within TOLERANCE; check_settings(report) asserts what must hold on every try.
    A try during which other tasks waited for a CPU more than spoiled_pressure of the time
    timed the machine's other load: a point off the arithmetic only in such tries skips,
    saying so."""
    lines: list[str] = []
    clean_tries = 0
    for attempt in range(1, TRIES + 1):
        document, cost_s, batch, pressure = run()
        check_settings(document)
        verdicts = [judge(loader, cost_s, batch, rank) for rank, loader in loaders_of(document)]
        spoiled = pressure is not None and pressure > spoiled_pressure
        clean_tries += not spoiled
        load = "" if pressure is None else f", CPU pressure {pressure:.2f}"
        lines += [f"try {attempt}{load}: {line}" for _, line in verdicts]
        if all(ok for ok, _ in verdicts):
            print("\n".join(lines))  # the figures, for pytest -s or -rP
            return document, lines
    if clean_tries:
        raise AssertionError("data-wait off the arithmetic:\n" + "\n".join(lines))
    pytest.skip(
        f"other load kept tasks waiting for a CPU over {spoiled_pressure:.0%} of every try: "
        + "; ".join(lines)
    )


def expected_settings(kwargs: dict, batch: int) -> dict:
    """What the report says of a DataLoader given `kwargs` and `batch` (DataLoader's own
    defaults filled in)."""
    workers = kwargs["num_workers"]
    return {
        "num_workers": workers,
        "pin_memory": kwargs.get("pin_memory", False),
        "prefetch_factor": kwargs.get("prefetch_factor", 2) if workers else None,
        "persistent_workers": kwargs.get("persistent_workers", False),
        "batch_size": batch,
    }


def settings_file(path: Path, workers: int, ranks: int) -> Path:
    """A settings file for this host, as `hostcheck loop --sweep --write` writes one."""
    recommendation = {
        "num_workers": workers,
        "pin_memory": False,
        "prefetch_factor": 2,
        "persistent_workers": True,
        "prefetcher": False,
        "samples_per_s": 500.0,
        "best_samples_per_s": 500.0,
        "data_wait_fraction": 0.0,
        "shm_bytes": 0,
    }
    workload = dataloader.Workload("jpeg", None, 224, 32, 0.05, ranks, None, 2)
    host = writing.this_host(os.cpu_count() or 1, 2**30, "cpu")
    dataloader.write(path, dataloader.record(recommendation, workload, host, 0.05, path=path))
    return path


def loader_checks(document: dict) -> list[tuple[str, str]]:
    """(what names the loader: rankN or loaderN, status) of each check besides the job's
    ending and its GPUs' (test_gpu_use.py): one a loader."""
    found = []
    for check in document["checks"]:
        if check["id"] in ("job", "job-gpu", "job-rank-skew"):  # test_gpu_use, test_waits_jobs
            continue
        names = re.findall(r"(rank[0-9]+|loader[0-9]+)", check["id"])
        found.append((names[0] if names else check["id"], check["status"]))
    return sorted(found)


def assert_completed(document: dict, code: int, stderr: str) -> None:
    job = document["job"]
    assert (job["outcome"], job["exit_status"], job["signal"]) == ("completed", 0, None), stderr
    assert {c["id"]: c["status"] for c in document["checks"]}["job"] == "pass"
    # every loader here waits for data far beyond the default profile's 5 %: the verdict
    # fails and so does the exit code, while the job itself succeeded
    assert (document["verdict"], code) == ("fail", 1), stderr


# ------------------------------------------------------------------ the seed article


def test_seed_article_settings_and_data_wait(tmp_path):
    """Scenario A (num_workers=0) and B (min(8, cpu_count) workers, pin_memory=True), 16
    batches of 64 each; data-wait as the arithmetic says for 5 ms samples."""
    run = job_run(tmp_path, "seed", seed_command(), environment(), SEED_COST_S, SEED_BATCH)

    def check_settings(document):
        (rank,) = document["job"]["ranks"]
        assert rank["rank"] is None and len(rank["loaders"]) == 2
        slow, fast = rank["loaders"]
        workers = min(8, os.cpu_count() or 4)
        assert slow["settings"] == expected_settings({"num_workers": 0}, SEED_BATCH)
        assert fast["settings"] == expected_settings(
            {"num_workers": workers, "pin_memory": True}, SEED_BATCH
        )
        lines = (JOBS / "seed_article.py").read_text().splitlines()
        created = [n for n, line in enumerate(lines, 1) if "= DataLoader(" in line]
        for loader, line in zip((slow, fast), created):
            assert loader["created_at"] == f"seed_article.py:{line}"
            assert (loader["iterations"], loader["batches"], loader["samples"]) == (1, 16, 1024)
            assert loader["steady_batches"] == 15 and loader["failure"] is None
        assert loader_checks(document) == [("loader1", "fail"), ("loader2", "fail")]
        # on any machine, however loaded: the workers take waiting off the training process
        assert fast["data_wait_fraction"] < slow["data_wait_fraction"]
        assert fast["samples_per_s"] > slow["samples_per_s"]

    measured_until_close(run, check_settings, SEED_QUIET_PRESSURE)


# ------------------------------------------------------------------ ImageFolder


@pytest.fixture(scope="module")
def image_tree() -> Path:
    return imagefolder_tree.build()


def sample_cost(tree: Path, workers: int) -> float:
    """Seconds a sample costs one process, measured by tests/jobs/sample_cost.py."""
    argv = [sys.executable, "-m", "tests.jobs.sample_cost", "--data", str(tree)]
    argv += ["--batch-size", str(IMAGE_BATCH), "--workers", str(workers)]
    done = isolated(argv, imagefolder_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["cost_s"]


def imagefolder_run(tmp_path: Path, tree: Path, workers: int, flags: list[str], env: dict):
    cost = functools.partial(sample_cost, tree, workers)
    return job_run(
        tmp_path, "imagefolder", imagefolder_command(tree, *flags), env, cost, IMAGE_BATCH
    )


def check_imagefolder(document: dict, settings: dict, tree: Path) -> None:
    (rank,) = document["job"]["ranks"]
    (loader,) = rank["loaders"]
    images = len(list(tree.rglob("*.jpg")))
    per_epoch = -(-images // IMAGE_BATCH)
    assert loader["settings"] == settings
    assert loader["created_at"].startswith("imagefolder_train.py:")
    assert loader["iterations"] == IMAGE_EPOCHS and loader["failure"] is None
    assert loader["batches"] == IMAGE_EPOCHS * per_epoch
    assert loader["samples"] == IMAGE_EPOCHS * images
    assert loader["steady_batches"] == IMAGE_EPOCHS * (per_epoch - 1)


def test_imagefolder_with_the_authors_settings(tmp_path, image_tree):
    """--workers 0 as typed: the training process decodes, then steps."""
    run = imagefolder_run(tmp_path, image_tree, 0, [], imagefolder_environment())
    settings = expected_settings({"num_workers": 0}, IMAGE_BATCH)
    measured_until_close(run, lambda document: check_imagefolder(document, settings, image_tree))


def test_imagefolder_with_hostcheck_settings(tmp_path, image_tree):
    """--hostcheck-settings: the DataLoader takes hostcheck.dataloader.settings() from the
    file $HOSTCHECK_DATALOADER names (one worker here, persistent), and hostcheck job reads
    the same file for its comparison: the settings used are the file's, so no finding says
    they differ. The data-wait is not held to the arithmetic here: one worker and the
    training process share this machine's two cores with the rest of the test suite, and
    how much each gets is the suite's doing (its gain is benchmarks/job_settings_gain.py's
    figure); the author's run above holds the ImageFolder script to the arithmetic."""
    path = settings_file(tmp_path / "dataloader.json", workers=1, ranks=1)
    env = imagefolder_environment({dataloader.ENV_VAR: str(path)})
    kwargs = dataloader.settings(1, path=path)
    assert kwargs["num_workers"] == 1
    report = tmp_path / "imagefolder-settings.json"
    command = imagefolder_command(image_tree, "--hostcheck-settings")
    document, _, stderr = run_job(command, report, env)
    job = document["job"]
    assert (job["outcome"], job["exit_status"]) == ("completed", 0), stderr
    check_imagefolder(document, expected_settings(kwargs, IMAGE_BATCH), image_tree)
    assert job["recommendation"] == {"path": str(path), "dataloader": kwargs}
    (loader_check,) = [c for c in document["checks"] if c["id"] not in ("job", "job-gpu")]
    compared = {"num_workers", "prefetch_factor", "persistent_workers", "pin_memory"}
    assert not [f["name"] for f in loader_check["findings"] if f["name"] in compared]
    (_, loader) = loaders_of(document)[0]
    assert loader["worker_cpu_cores"] > 0.2  # the worker decoded the JPEGs


def test_cpu_torchvision_empties_the_registrations_only_without_ops():
    """The sitecustomize the ImageFolder job runs with: torchvision imports next to CPU torch,
    its two registration modules are empty exactly when its ops did not load."""
    probe = (
        "import sys, torchvision, torchvision.extension as e; "
        "empty = not hasattr(sys.modules['torchvision._meta_registrations'], 'register_meta'); "
        "print(e._has_ops(), empty, torchvision.datasets.ImageFolder.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=environment(path=CPU_TORCHVISION),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    has_ops, empty, name = done.stdout.split()
    assert name == "ImageFolder" and empty == str(has_ops == "False")


# ------------------------------------------------------------------ torchrun, two ranks


def check_ranks(document: dict, settings: dict, samples: int = 1024, batch: int = DDP_BATCH):
    """Two ranks of `samples` (DistributedSampler: half a rank) in batches of `batch`, two
    epochs, each rank with one loader of `settings`."""
    ranks = document["job"]["ranks"]
    assert [(r["rank"], r["local_rank"], r["world_size"]) for r in ranks] == [(0, 0, 2), (1, 1, 2)]
    per_epoch = samples // 2 // batch
    for rank in ranks:
        (loader,) = rank["loaders"]
        assert loader["settings"] == settings
        assert (loader["iterations"], loader["batches"], loader["samples"]) == (
            2,
            2 * per_epoch,
            samples,
        )
        assert loader["steady_batches"] == 2 * (per_epoch - 1) and loader["failure"] is None


def test_ddp_two_ranks_each_as_the_arithmetic_says(tmp_path):
    """torchrun, two ranks (gloo), --workers 0 as typed: each rank sleeps 5 ms a sample,
    then steps on its own core (torchrun gives each one thread). One entry per rank, each
    within 15 %, and one verdict for the job: both ranks' loaders fail the 5 % data-wait."""
    run = job_run(tmp_path, "ddp", ddp_command(), environment(), DDP_COST_S, DDP_BATCH)

    def check_settings(document):
        check_ranks(document, expected_settings({"num_workers": 0}, DDP_BATCH))
        assert loader_checks(document) == [("rank0", "fail"), ("rank1", "fail")]
        skew = [c["status"] for c in document["checks"] if c["id"] == "job-rank-skew"]
        assert document["counts"]["fail"] == 2 + skew.count("fail")

    measured_until_close(run, check_settings)


def test_ddp_with_hostcheck_settings_shares_the_host_between_ranks(tmp_path):
    """--hostcheck-settings with a file measured for one rank with two workers: each of the
    two ranks (LOCAL_WORLD_SIZE=2) gets the host's budget shared, one worker. That worker
    cannot feed its rank: its samples sleep 100 ms, 800 ms a batch of 8, against a step of
    about 35 ms of one core. Both ranks wait for data beyond the default 5 %, the job fails
    the verdict. Data-wait is not compared with the arithmetic here: a rank's step includes
    waiting in the all-reduce for the other rank's batch, so one rank's data-wait shows as
    the other's compute and the split is not what a model of one process predicts.

    The starvation is by construction: a busy machine stretches the step's compute (the
    suite's load took it to 7 times its CPU time), never the sleeps below it. With
    ddp_train.py's defaults (5 ms samples, 160 ms a batch of 32) the step's 130 ms of CPU
    left a 20 % margin that load closed: on a loaded two-core machine the job was fed and
    passed (see DDP_STARVED)."""
    path = settings_file(tmp_path / "dataloader.json", workers=2, ranks=1)
    kwargs = dataloader.settings(2, path=path)
    assert kwargs["num_workers"] == 1
    env = environment({dataloader.ENV_VAR: str(path)})
    flags = [f"--{name}={value}" for name, value in DDP_STARVED.items()]
    document, code, stderr = run_job(
        ddp_command("--hostcheck-settings", *flags), tmp_path / "ddp.json", env
    )
    waits = [
        f"rank {rank['rank']}: data-wait {lo['data_wait_fraction']}, compute "
        f"{lo['compute_s_per_batch']} s a batch"
        for rank, lo in loaders_of(document)
    ]
    assert loader_checks(document) == [("rank0", "fail"), ("rank1", "fail")], waits
    assert_completed(document, code, stderr)
    samples, batch = DDP_STARVED["samples"], DDP_STARVED["batch-size"]
    check_ranks(document, expected_settings(kwargs, batch), samples, batch)
