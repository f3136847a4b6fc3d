"""Running jobs under `hostcheck job` for the tests: a small Dataset whose samples cost a
known time, the command as a user runs it, the report it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

from tests.support.loop_point import raise_share

# What the unit modules that run real jobs under hostcheck job cover (their COVERS, read by
# tests/selection.py): out of the gate, a change to these paths selects them.
JOB_RUN_COVERS = (
    "hostcheck/*",
    "plugins/module_utils/*",
    "tests/jobs/*",
    "tests/support/job_runs.py",
    "tests/support/loop_point.py",
)

LOADER = textwrap.dedent(
    """
    import os, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __init__(self, n, cost):
            self.n, self.cost = n, cost
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            time.sleep(self.cost)
            return torch.zeros(16), i
    """
)


def job_argv(report: Path, *options: str) -> list[str]:
    """`hostcheck job --report json:REPORT [options]`, as this Python runs it; the job's
    command follows."""
    return [sys.executable, "-m", "hostcheck", "job", "--report", f"json:{report}", *options]


def hostcheck_job(
    tmp_path: Path, script: str, *options: str, env=None, timeout=120, isolated=False
):
    """Run the script under hostcheck job; (exit code, report document or None, stderr).
    isolated: in a session of its own with a larger CPU share, as tests/jobs/isolated.py
    runs the measured jobs (for a test whose verdict depends on the job getting the CPU
    when it asks: other test modules and sandbox fleets share this machine's cores)."""
    path = tmp_path / "train.py"
    path.write_text(LOADER + textwrap.dedent(script))
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [*job_argv(report, *options), "--", sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env={**_without_settings_variable(), **(env or {})},
        start_new_session=isolated,
        preexec_fn=raise_share if isolated else None,
    )
    document = json.loads(report.read_text()) if report.exists() else None
    return completed.returncode, document, completed.stderr


def line_of(tmp_path: Path, text: str) -> int:
    """The line number of the first line of the job's train.py containing text."""
    lines = (tmp_path / "train.py").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def _without_settings_variable() -> dict:
    """This machine has no /etc/hostcheck/dataloader.json; tests that want one pass --settings."""
    return {k: v for k, v in os.environ.items() if k != "HOSTCHECK_DATALOADER"}


def checks_by_id(document: dict) -> dict:
    return {check["id"]: check for check in document["checks"]}


def loaders(document: dict) -> list[dict]:
    return [lo for rank in document["job"]["ranks"] for lo in rank["loaders"]]


def write_settings(tmp_path: Path, num_workers: int) -> Path:
    """A settings file for this host, as `hostcheck loop --sweep --write` writes it."""
    path = tmp_path / "dataloader.json"
    document = {
        "schema_version": 1,
        "kind": "hostcheck-dataloader-settings",
        "hostcheck_version": "0.1.0",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {
            "hostname": os.uname().nodename,
            "cpus": os.cpu_count(),
            "physical_cores": psutil.cpu_count(logical=False) or 1,
            "memory_bytes": psutil.virtual_memory().total,
            "device": "cpu",
        },
        "workload": {
            "sample": "sleep",
            "sample_cost_us": 4000.0,
            "image_size": 224,
            "batch_size": 8,
            "step_time_s": 0.032,
            "ranks_per_node": 1,
            "dataset_path": None,
            "max_workers": 2,
        },
        "dataloader": {
            "num_workers": num_workers,
            "pin_memory": False,
            "prefetch_factor": 2,
            "persistent_workers": True,
        },
        "prefetcher": False,
        "measured": {
            "samples_per_s": 250.0,
            "best_samples_per_s": 250.0,
            "data_wait_fraction": 0.01,
            "shm_bytes_per_rank": 4096,
            "tolerance": 0.05,
        },
    }
    path.write_text(json.dumps(document))
    return path
