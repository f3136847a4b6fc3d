"""How the tests (tests/unit/hostcheck/job/test_command_scripts.py) and the benchmarks
(benchmarks/job_*.py) run the job scripts of this folder: their command lines, their
environment, and what the scripts print about their own speed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

JOBS = Path(__file__).resolve().parent
REPO = JOBS.parents[1]
CPU_TORCHVISION = JOBS / "cpu_torchvision"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
SETTINGS_ENV = "HOSTCHECK_DATALOADER"  # hostcheck.dataloader.ENV_VAR
# The ImageFolder job's training process uses one thread (torchrun sets the same for each
# rank): with torch's default of one intra-op thread per core its step would take the
# worker's core too, where a GPU step leaves the cores to the loading.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
IMAGE_BATCH, IMAGE_EPOCHS = 32, 3


def environment(extra: dict | None = None, path: Path | None = None) -> dict:
    """This environment without a settings file named (unless `extra` names one), with
    `extra` and with `path` first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != SETTINGS_ENV}
    env.update(extra or {})
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(path), env.get("PYTHONPATH")) if p)
    return env


def seed_command() -> list[str]:
    return [sys.executable, str(JOBS / "seed_article.py")]


def imagefolder_command(tree: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        str(JOBS / "imagefolder_train.py"),
        "--data",
        str(tree),
        "--batch-size",
        str(IMAGE_BATCH),
        "--epochs",
        str(IMAGE_EPOCHS),
        *flags,
    ]


def imagefolder_environment(extra: dict | None = None) -> dict:
    """torchvision next to CPU torch (cpu_torchvision/), one thread."""
    return environment({**ONE_THREAD, **(extra or {})}, CPU_TORCHVISION)


def ddp_command(*flags: str) -> list[str]:
    return [TORCHRUN, "--standalone", "--nproc-per-node", "2", str(JOBS / "ddp_train.py"), *flags]


def isolated(
    argv: list[str], env: dict, timeout: float = 240, cwd: Path = REPO
) -> subprocess.CompletedProcess:
    """Run argv in a session of its own with a larger CPU share (isolated.py); from another
    folder than the checkout, env must have the checkout on PYTHONPATH."""
    return subprocess.run(
        [sys.executable, "-m", "tests.jobs.isolated", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
        check=False,
    )


SEED_LINE = re.compile(r"^Time taken for .*: ([0-9.]+) seconds\.$", re.M)
EPOCH_LINE = re.compile(r"^epoch [0-9]+: ([0-9]+) samples in ([0-9.]+) s,", re.M)
SEED_SAMPLES = 1024  # a scenario of the seed article: one epoch of 1024 samples


def throughput(stdout: str) -> tuple[int, float]:
    """(samples, seconds) over the epochs a job script reported (the seed article's script:
    its two scenarios)."""
    seed = SEED_LINE.findall(stdout)
    if seed:
        return SEED_SAMPLES * len(seed), sum(float(s) for s in seed)
    epochs = EPOCH_LINE.findall(stdout)
    if not epochs:
        raise ValueError(f"no epoch times in the job's output: {stdout[-500:]!r}")
    return sum(int(n) for n, _ in epochs), sum(float(s) for _, s in epochs)
