"""Failures are verdicts, and no DataLoader worker outlives hostcheck: tested for real.

/dev/shm too small: a 1 MiB tmpfs on /dev/shm in a private mount namespace (`unshare -m`,
root only; skipped elsewhere). Too few open files: a low RLIMIT_NOFILE in the child. Worker
lifetime: hostcheck is SIGKILLed, SIGTERMed and interrupted in the middle of a loop, a
dataset raises, a worker hangs; each time every worker it had is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from hostcheck.loop import measure
from hostcheck.loop.settings import LoopSettings
from tests.paths import CHECKOUT as REPO

HOSTCHECK = [sys.executable, "-m", "hostcheck"]


def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1M tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


NEEDS_NAMESPACE = pytest.mark.skipif(
    not can_unshare(), reason="needs root and mount namespaces (unshare -m) for a small tmpfs"
)


def in_small_shm(argv: list[str], size: str = "1M") -> subprocess.CompletedProcess:
    """Run argv with a `size` tmpfs on /dev/shm, in a private mount namespace."""
    script = f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec " + " ".join(
        f"'{a}'" for a in argv
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


def loop_report(done: subprocess.CompletedProcess) -> dict:
    assert done.stdout, done.stderr[-2000:]
    document = json.loads(done.stdout)
    (check,) = document["checks"]
    return check


QUICK_LOOP = [
    "loop",
    "--device",
    "cpu",
    "--sample",
    "busy",
    "--sample-cost-us",
    "200",
    "--batch-size",
    "16",
    "--workers",
    "2",
    "--step-ms",
    "5",
    "--seconds",
    "0.5",
    "--report",
    "json:-",
]


@NEEDS_NAMESPACE
def test_small_shm_is_a_verdict_naming_need_and_size():
    done = in_small_shm([*HOSTCHECK, *QUICK_LOOP])
    assert done.returncode == 1, done.stderr[-2000:]
    check = loop_report(done)
    assert check["status"] == "fail"
    failure = check["data"]["result"]["failure"]
    assert failure["kind"] == "shm"
    # 2 workers x prefetch_factor 2 x (16 x 3 x 224 x 224 + 16 x 8 label bytes)
    need = 2 * 2 * (16 * 3 * 224 * 224 + 16 * 8)
    assert f"needed about {need / 2**20:.1f} MiB" in failure["message"]
    assert "have 1.0 MiB" in failure["message"]
    assert failure["message"].startswith("shm too small: ")
    assert "shm_size (role shm)" in check["remedy"]
    assert "Traceback" not in done.stderr


@NEEDS_NAMESPACE
def test_worker_killed_by_sigbus_is_reported_as_shm_too_small(tmp_path):
    script = tmp_path / "sigbus.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, mmap, os, sys
            import torch
            from torch.utils.data import Dataset
            from hostcheck.loop import measure
            from hostcheck.loop.settings import LoopSettings

            class StagedInShm(Dataset):
                # each sample is staged through a memory map in /dev/shm, as shm caches do
                def __len__(self):
                    return 1000
                def __getitem__(self, index):
                    size = 4 * 2**20
                    path = f"/dev/shm/staged-{os.getpid()}-{index}"
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                    os.ftruncate(fd, size)
                    with mmap.mmap(fd, size) as pages:
                        pages[:] = b"x" * size  # more than the tmpfs has: SIGBUS
                    os.close(fd)
                    return torch.zeros(3, 8, 8, dtype=torch.uint8), index

            settings = LoopSettings(device="cpu", sample="busy", batch_size=4, num_workers=1,
                                    step_time=0.001, seconds=0.5, timeout=30)
            result = measure.run(settings, dataset=StagedInShm())
            print(json.dumps(result.to_dict()))
            """
        )
    )
    done = in_small_shm([sys.executable, str(script)], size="2M")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["failure"]["kind"] == "shm"
    assert result["failure"]["message"].startswith("shm too small: ")
    assert "have 2.0 MiB" in result["failure"]["message"]
    assert "Bus error" in result["failure"]["detail"]  # the worker really died of SIGBUS
    assert "bus error" in result["worker_log"].lower()  # PyTorch's worker said so


def _low_nofile(limit: int):
    def apply() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    return apply


def test_too_few_open_files_is_a_verdict_before_any_worker_starts():
    started = time.monotonic()
    done = subprocess.run(
        [*HOSTCHECK, *QUICK_LOOP],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_low_nofile(24),
        check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    check = loop_report(done)
    failure = check["data"]["result"]["failure"]
    assert failure["kind"] == "nofile"
    assert failure["message"].startswith("too few open files: needed about ")
    assert failure["message"].endswith("have 24 (soft nofile limit)")
    assert "ulimits_nofile_soft" in check["remedy"]
    assert check["data"]["result"]["killed_workers"] == []
    assert time.monotonic() - started < 30


def test_too_few_open_files_while_running_is_a_verdict_too():
    """The check before starting is off: the workers run into the limit for real."""
    settings = {
        "device": "cpu",
        "sample": "busy",
        "sample_cost_s": 0.0002,
        "batch_size": 16,
        "num_workers": 2,
        "prefetch_factor": 8,
        "step_time": 0.005,
        "seconds": 1.0,
        "timeout": 10,
        "check_open_files": False,
        "startup_both": False,
    }
    done = subprocess.run(
        [sys.executable, str(REPO / "tests" / "support" / "loop_point.py"), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_low_nofile(24),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["failure"] is not None, "24 open files were enough: the limit is not tight"
    assert result["failure"]["kind"] == "nofile"
    assert "have 24 (soft nofile limit)" in result["failure"]["message"]


def test_open_files_estimate_covers_what_the_loop_used():
    result = measure.run(
        LoopSettings(
            device="cpu",
            sample="busy",
            sample_cost_s=0.0005,
            batch_size=8,
            num_workers=2,
            prefetch_factor=4,
            step_time=0.004,
            seconds=0.6,
            sample_shape=(3, 16, 16),
        )
    )
    assert result.failure is None
    assert result.open_files_peak > 0
    assert result.open_files_peak <= result.open_files_needed <= 2 * result.open_files_peak


# ---------------------------------------------------------------- worker lifetime


def children_of(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def start_long_loop(sample_us: int, batch: int) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [
            *HOSTCHECK,
            "loop",
            "--device",
            "cpu",
            "--sample",
            "sleep",
            "--sample-cost-us",
            str(sample_us),
            "--batch-size",
            str(batch),
            "--workers",
            "2",
            "--step-ms",
            "10",
            "--seconds",
            "120",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wait_until(lambda: len(children_of(proc.pid)) >= 2, 30), "no workers started"
    time.sleep(0.5)  # in the middle of the epoch
    return proc, children_of(proc.pid)


def kill_all(pids: list[int]) -> None:
    """Never leave a stray process behind, even when a test fails."""
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_worker_outlives_a_killed_hostcheck(sig):
    """Each worker is inside a 4 s sample when hostcheck dies: PyTorch's own watchdog would
    notice only when the sample is done; PR_SET_PDEATHSIG ends the worker at once."""
    proc, workers = start_long_loop(4_000_000, 1)
    try:
        os.kill(proc.pid, sig)
        proc.wait(timeout=10)
        assert wait_until(lambda: gone(workers), 1.5), f"workers {workers} outlived hostcheck"
    finally:
        kill_all(workers)


def test_interrupted_hostcheck_stops_its_workers_and_says_so():
    proc, workers = start_long_loop(20_000, 4)
    try:
        proc.send_signal(signal.SIGINT)
        # 20 s was once too short on a loaded machine (make test with other work beside it)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "interrupted" in err
        assert gone(workers)
    finally:
        kill_all(workers)


class Raises:
    """A dataset whose 40th sample raises."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int):
        import torch

        if index == 40:
            raise ValueError("sample 40 is corrupt")
        return torch.zeros(4, dtype=torch.uint8), index


class Hangs:
    """A dataset whose 20th sample never comes back."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int):
        import torch

        if index == 20:
            time.sleep(3600)
        return torch.zeros(4, dtype=torch.uint8), index


def test_a_worker_exception_is_a_verdict_and_leaves_no_worker():
    before = set(children_of(os.getpid()))
    result = measure.run(
        LoopSettings(
            device="cpu", sample="busy", batch_size=4, num_workers=2, step_time=0.002, seconds=1
        ),
        dataset=Raises(),
    )
    assert result.failure is not None
    assert result.failure.kind == "worker"
    assert "sample 40 is corrupt" in result.failure.message + result.worker_log
    assert set(children_of(os.getpid())) <= before


def test_a_hung_worker_times_out_and_is_killed():
    before = set(children_of(os.getpid()))
    started = time.monotonic()
    result = measure.run(
        LoopSettings(
            device="cpu",
            sample="busy",
            batch_size=4,
            num_workers=1,
            step_time=0.002,
            seconds=2,
            timeout=1.0,
            startup_both=False,
        ),
        dataset=Hangs(),
    )
    assert result.failure is not None
    assert result.failure.kind == "timeout"
    assert set(children_of(os.getpid())) <= before
    assert time.monotonic() - started < 20
