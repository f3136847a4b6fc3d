#!/usr/bin/env python3
"""What `hostcheck job` costs the job it measures: the job scripts' own throughput with and
without it, side by side.

Each job script of tests/jobs/ (the seed article's, the ImageFolder one, the two-rank
torchrun one) runs bare and under `hostcheck job --report json:...`, alternating (bare then
job in odd rounds, job then bare in even ones, so drift of the machine cancels). The figure
is what each script prints itself: its epoch times (the seed article's: its two scenarios),
as samples/s. Printed: the median of each, the overhead in step time (bare samples/s over
samples/s under hostcheck job, minus one; goal at most 2 %), each round's, and the CPU
seconds the whole process tree took with and without (hostcheck job's start-up, watcher,
probe and report included).

    .venv/bin/python benchmarks/job_overhead.py [--rounds 4] [--scripts seed,imagefolder,ddp]
        [--shared]

It runs in a session of its own with a larger CPU share (benchmarks/isolate.py) unless
--shared is given.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # isolate
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.jobs

import isolate

from tests.jobs import imagefolder_tree, scripts

GOAL = 0.02
# A job whose steps cost nothing: 20,000 batches of one tiny sample a epoch, so what hostcheck
# job adds to each batch (the probe around DataLoader's __next__) shows in microseconds.
NEXT_ONLY = """
import time
import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.zeros(20000, 4)), batch_size=1)
for epoch in range(3):
    began, count = time.perf_counter(), 0
    for (x,) in loader:
        count += 1
    print(f"epoch {epoch}: {count} samples in {time.perf_counter() - began:.4f} s,")
"""


def commands(names: list[str]) -> dict[str, tuple[list[str], dict, int]]:
    """name -> (command, environment, samples a training step takes over all ranks) of the
    job scripts asked for."""
    known = {
        "seed": lambda: (scripts.seed_command(), scripts.environment(), 64),
        "imagefolder": lambda: (
            scripts.imagefolder_command(imagefolder_tree.build()),
            scripts.imagefolder_environment(),
            scripts.IMAGE_BATCH,
        ),
        "ddp": lambda: (scripts.ddp_command(), scripts.environment(), 2 * 32),
        "next-only": lambda: ([sys.executable, "-c", NEXT_ONLY], scripts.environment(), 1),
    }
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown scripts: {', '.join(unknown)} (known: {', '.join(known)})")
    return {name: known[name]() for name in names}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command: list[str], env: dict, report: Path | None) -> tuple[float, float]:
    """(samples/s the script printed, CPU seconds of the process tree)."""
    argv = command
    if report is not None:
        job = [sys.executable, "-m", "hostcheck", "job", "--report", f"json:{report}", "--"]
        argv = job + command
    before = children_cpu()
    done = subprocess.run(
        argv, cwd=scripts.REPO, env=env, capture_output=True, text=True, check=False
    )
    cpu = children_cpu() - before
    if report is None and done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    samples, seconds = scripts.throughput(done.stdout)
    return samples / seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="bare and job runs of each")
    parser.add_argument(
        "--scripts", default="seed,imagefolder,ddp,next-only", help="comma-separated"
    )
    parser.add_argument("--shared", action="store_true", help="no session of its own")
    args = parser.parse_args()
    if not args.shared:
        code = isolate.rerun_isolated()
        if code is not None:
            return code
    jobs = commands(args.scripts.split(","))
    print(
        f"{os.cpu_count()} CPUs; CPU share: {isolate.share()}; {args.rounds} rounds, each "
        "script bare and under hostcheck job, alternating"
    )
    header = (
        f"{'script':<12} | {'bare sps':>8} {'job sps':>8} | {'overhead':>8} {'us/batch':>8} "
        f"| {'per round':<{7 * args.rounds}} | {'CPU bare':>8} {'CPU job':>8}"
    )
    print(header)
    print("-" * len(header))
    worst = None
    with tempfile.TemporaryDirectory() as folder:
        for name, (command, env, step_samples) in jobs.items():
            bare: list[tuple[float, float]] = []
            probed: list[tuple[float, float]] = []
            for round_ in range(args.rounds):
                report = Path(folder) / f"{name}-{round_}.json"
                order = (None, report) if round_ % 2 == 0 else (report, None)
                for target in order:
                    (bare if target is None else probed).append(run_once(command, env, target))
            bare_sps = statistics.median(s for s, _ in bare)
            job_sps = statistics.median(s for s, _ in probed)
            overhead = bare_sps / job_sps - 1
            per_batch_us = (1 / job_sps - 1 / bare_sps) * 1e6 * step_samples
            if name != "next-only":
                worst = overhead if worst is None else max(worst, overhead)
            rounds = " ".join(f"{b / j - 1:+6.1%}" for (b, _), (j, _) in zip(bare, probed))
            print(
                f"{name:<12} | {bare_sps:8.1f} {job_sps:8.1f} | {overhead:+8.1%} "
                f"{per_batch_us:+8.1f} | {rounds:<{7 * args.rounds}} "
                f"| {statistics.median(c for _, c in bare):7.2f}s "
                f"{statistics.median(c for _, c in probed):7.2f}s"
            )
    verdict = (
        ""
        if worst is None
        else (
            f" the goal is at most {GOAL:.0%} for the training scripts: "
            f"{'met' if worst <= GOAL else 'NOT met'} (worst {worst:+.1%})."
        )
    )
    print(
        f"\noverhead: step time under hostcheck job over bare (bare samples/s / job samples/s "
        f"- 1), medians of {args.rounds} runs each, and as microseconds per batch;{verdict} "
        "samples/s: what the scripts print (their epoch times); per round: the same from "
        "each pair of runs (the machine's noise); CPU: user+system seconds of the whole "
        "process tree of one run (hostcheck job's start-up, watcher, probe and report in "
        "'job'). next-only: a loop of 60,000 batches that does nothing but next()."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
