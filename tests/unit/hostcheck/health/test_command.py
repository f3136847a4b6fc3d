"""`hostcheck healthcheck` as slurmd or node-problem-detector runs it, on this machine: real
checks, a real storage read test whose measurement fails, the state kept between runs."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest

# Checks this machine fails whatever the test does (its limits are fixed) are switched off;
# the storage read test fails on purpose: no disk reads a petabyte a second.
CONFIG = """\
checks:
  ulimits: {enabled: false}
  sysctl: {enabled: false}
  cpu: {enabled: false}
  memory: {enabled: false}
  shm: {min_size: 1MiB, min_free: 1MiB}
  storage:
    min_free: 1MiB
    read_test: {enabled: true, max_seconds: 1, min_bytes_per_second: 1PB}
"""


@pytest.fixture
def place(tmp_path):
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    for index in range(4):
        (dataset / f"sample{index}.bin").write_bytes(os.urandom(256 << 10))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    common = ["--profile", "quick", "--config", str(config), "--dataset-path", str(dataset)]
    return {
        "common": common,
        "report": tmp_path / "report.json",
        "state": tmp_path / "state",
        "tmp": tmp_path,
    }


def hostcheck(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hostcheck", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def full_run(place) -> dict:
    """What the role runs: measurements kept while they stand, a failed one taken again."""
    report = str(place["report"])
    done = hostcheck(
        "run", *place["common"], "--reuse-measurements", report, "--report", f"json:{report}"
    )
    assert done.returncode == 1, done.stderr
    checks = {c["id"]: c for c in json.loads(place["report"].read_text())["checks"]}
    assert checks["storage"]["status"] == "fail", checks["storage"]["summary"]
    return checks


def healthcheck(place, *more: str) -> subprocess.CompletedProcess:
    return hostcheck(
        "healthcheck",
        *place["common"],
        "--measurements",
        str(place["report"]),
        "--state-dir",
        str(place["state"]),
        *more,
    )


def test_a_measured_failure_is_watched_once_and_unhealthy_on_the_next_measurement(place):
    full_run(place)
    first = healthcheck(place)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "healthy (watching storage: failed 1 of the 2" in first.stdout
    assert len(first.stdout.splitlines()) == 1
    again = healthcheck(place)  # the same measurement read again counts once
    assert again.returncode == 0, again.stdout
    time.sleep(1.1)  # measurements are told apart by their time, to the second
    full_run(place)
    second = healthcheck(place)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "unhealthy: storage: read throughput" in second.stdout
    assert "(2 measurements in a row)" in second.stdout
    kept = json.loads((place["state"] / "state.json").read_text())
    assert kept["streaks"]["storage"]["failures"] == 2
    assert kept["last"]["verdict"] == "unhealthy" and kept["last"]["exit_code"] == 1
    assert kept["last"]["line"] == second.stdout.strip()


def test_a_failing_setting_is_unhealthy_at_once_and_measurements_not_standing_say_why(place):
    full_run(place)
    done = healthcheck(place, "--set", "shm.min_size=1PiB")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "unhealthy: shm: size" in done.stdout and "(expected >= 1024.0 TiB)" in done.stdout
    kept = json.loads((place["state"] / "state.json").read_text())
    # another threshold is another profile: the report's measurements do not stand for it
    assert kept["last"]["measurements"].startswith("no measurements stand: the profile changed")


def test_the_line_fits_node_problem_detector_and_bad_usage_exits_2(place):
    whole = healthcheck(place, "--set", "shm.min_size=1PiB")
    cut = healthcheck(place, "--set", "shm.min_size=1PiB", "--max-length", "40")
    assert whole.returncode == cut.returncode == 1
    line = whole.stdout.rstrip("\n")
    assert len(line) > 40 and cut.stdout == line[:37] + "...\n"
    for args, said in [
        (("--consecutive", "0"), "--consecutive must be 1 or more"),
        (("--budget", "0"), "--budget must be more than 0"),
        (("--dry-run",), "--dry-run needs --slurm"),
        (("--max-length", "5"), "--max-length must be 20 or more"),
    ]:
        bad = healthcheck(place, *args)
        assert bad.returncode == 2 and bad.stderr.startswith(f"hostcheck: error: {said}")


def test_a_silent_controller_costs_at_most_the_budget_and_leaves_the_node_alone(place):
    # an scontrol that never answers, as one does with slurmctld unreachable
    silent = place["tmp"] / "scontrol"
    silent.write_text("#!/bin/sh\nexec sleep 600\n")
    silent.chmod(0o755)
    began = time.monotonic()
    done = healthcheck(
        place, "--slurm", "--node", "node9", "--scontrol", str(silent), "--budget", "4"
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout + done.stderr
    assert "slurm: not told: scontrol -o gave no answer" in done.stdout
    assert took < 4 + 5, took  # the budget, and the interpreter's start on a loaded machine


def test_the_budget_ends_a_run_stuck_anywhere_with_one_line_and_exit_2():
    probe = (
        "import time; from hostcheck.commands.healthcheck import Budget\n"
        "with Budget(0.5, 'hostcheck healthcheck n1: ', None) as b:\n"
        "    b.doing = 'checking the settings'\n"
        "    time.sleep(30)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stdout == (
        "hostcheck healthcheck n1: unknown: the 0.5 s budget ran out while checking the settings\n"
    )


def test_a_dry_run_reaches_its_verdict_while_slurmds_run_holds_the_lock(place):
    """The role's verify runs --dry-run while slurmd may be running the health check."""
    place["state"].mkdir()
    scontrol = place["tmp"] / "scontrol"
    scontrol.write_text("#!/bin/sh\necho NodeName=node9 State=IDLE Reason=(null)\n")
    scontrol.chmod(0o755)
    with open(place["state"] / "lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        dry = healthcheck(
            place, "--slurm", "--dry-run", "--node", "node9", "--scontrol", str(scontrol)
        )
        busy = healthcheck(place)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.startswith("hostcheck healthcheck node9: healthy")
    assert busy.returncode == 2 and "unknown: another health check holds" in busy.stdout
    assert not (place["state"] / "state.json").exists()
