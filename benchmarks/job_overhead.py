#!/usr/bin/env python3
"""What `hostcheck job` costs the job it measures: the job scripts' own throughput with and
without it, and with and without its GPU sampling, side by side.

Each job script of tests/jobs/ (the seed article's, the ImageFolder one, the two-rank
torchrun one) runs bare, under `hostcheck job --report json:...` with its GPU sampling off,
and with it on, alternating (the order turns each round, so drift of the machine cancels).
GPU sampling goes through the sandbox's fake libnvidia-ml.so.1 (tests/sandbox/fake_nvml.c,
built with gcc): eight busy GPUs for "on"; for "off", one whose driver is not loaded (NVML
answers nothing, as on a host without GPU). The figure is what each script prints itself:
its epoch times (the seed article's: its two scenarios), as samples/s. Printed: the median of
each, the overheads in step time (samples/s without over samples/s with, minus one; goal at
most 2 %): hostcheck job over bare, and GPU sampling on over off; each round's; and the CPU
seconds the whole process tree took (hostcheck job's start-up, watcher, GPU sampler, probe and
report included).

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

from hostcheck.job import gpu_use
from tests.jobs import imagefolder_tree, scripts
from tests.support.fake_libnvml import build_fake_nvml, gcc_missing, write_state

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


MODES = ("bare", "job", "gpu")  # bare; hostcheck job, GPU sampling off; on


def fake_nvml(folder: Path) -> dict[str, dict]:
    """mode -> the environment's additions: LD_LIBRARY_PATH to a fake NVML, eight busy GPUs
    for "gpu", a driver not loaded for "job"."""
    on, off = folder / "nvml-on", folder / "nvml-off"
    build_fake_nvml(on, gpus=8)
    build_fake_nvml(off, init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    state = folder / "nvml-state"
    busy = {"util": 90, "memory_used": 8 << 30, "pcie_tx": 2000, "pcie_rx": 400000}
    write_state(state, {index: {**busy, "pids": [1]} for index in range(8)})
    return {
        "bare": {},
        "job": {"LD_LIBRARY_PATH": str(off)},
        "gpu": {"LD_LIBRARY_PATH": str(on), "FAKE_NVML_STATE": str(state)},
    }


# CPU time of the sampler's rounds over the eight fake GPUs, in a process that loads the fake.
SAMPLER_CPU = """
import time, pynvml
from hostcheck.job import gpu_use
sampler = gpu_use.Sampler(None)
pynvml.nvmlInit()
handles = sampler._open(pynvml)
began, rounds = time.process_time(), 400
for _ in range(rounds):
    for trace, handle in handles:
        sampler._sample(pynvml, trace, handle)
print(len(handles), (time.process_time() - began) / rounds)
"""


def sampler_cpu(env: dict) -> str:
    """One line: the CPU a sample round of the GPU sampler takes, and its share of a core."""
    done = subprocess.run(
        [sys.executable, "-c", SAMPLER_CPU],
        cwd=scripts.REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    gpus, seconds = done.stdout.split()
    every = gpu_use.SAMPLE_EVERY_S
    return (
        f"GPU sampler: {float(seconds) * 1e3:.2f} ms CPU a round of {gpus} GPUs (fake NVML), "
        f"{float(seconds) / every:.2%} of a core at one round every {every} s"
    )


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
    if gcc_missing():
        raise SystemExit(f"{gcc_missing()}: GPU sampling cannot be measured")
    jobs = commands(args.scripts.split(","))
    print(
        f"{os.cpu_count()} CPUs; CPU share: {isolate.share()}; {args.rounds} rounds, each "
        "script bare, under hostcheck job with GPU sampling off and on (fake NVML, 8 GPUs), "
        "in turns"
    )
    width = 7 * args.rounds
    header = (
        f"{'script':<12} | {'bare sps':>8} {'job sps':>8} {'gpu sps':>8} | {'job/bare':>8} "
        f"{'us/batch':>8} {'gpu/job':>8} | {'job/bare per round':<{width}} | "
        f"{'gpu/job per round':<{width}} | {'CPU bare':>8} {'CPU job':>8} {'CPU gpu':>8}"
    )
    print(header)
    print("-" * len(header))
    worst = {"job": None, "gpu": None}
    with tempfile.TemporaryDirectory() as folder:
        additions = fake_nvml(Path(folder))
        sampler_line = sampler_cpu(additions["gpu"])
        for name, (command, env, step_samples) in jobs.items():
            runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
            for round_ in range(args.rounds):
                turn = round_ % len(MODES)
                for mode in MODES[turn:] + MODES[:turn]:
                    report = None if mode == "bare" else Path(folder) / f"{name}-{mode}.json"
                    runs[mode].append(run_once(command, {**env, **additions[mode]}, report))
            sps = {mode: statistics.median(s for s, _ in runs[mode]) for mode in MODES}
            cpu = {mode: statistics.median(c for _, c in runs[mode]) for mode in MODES}
            overhead = {"job": sps["bare"] / sps["job"] - 1, "gpu": sps["job"] / sps["gpu"] - 1}
            per_batch_us = (1 / sps["job"] - 1 / sps["bare"]) * 1e6 * step_samples
            if name != "next-only":
                for key, value in overhead.items():
                    worst[key] = value if worst[key] is None else max(worst[key], value)

            def per_round(without: str, with_: str, runs=runs) -> str:
                pairs = zip(runs[without], runs[with_])
                return " ".join(f"{w / x - 1:+6.1%}" for (w, _), (x, _) in pairs)

            print(
                f"{name:<12} | {sps['bare']:8.1f} {sps['job']:8.1f} {sps['gpu']:8.1f} | "
                f"{overhead['job']:+8.1%} {per_batch_us:+8.1f} {overhead['gpu']:+8.1%} | "
                f"{per_round('bare', 'job'):<{width}} | {per_round('job', 'gpu'):<{width}} | "
                f"{cpu['bare']:7.2f}s {cpu['job']:7.2f}s {cpu['gpu']:7.2f}s"
            )
    verdict = ""
    if worst["job"] is not None:
        verdict = (
            f" The goal is at most {GOAL:.0%} for the training scripts: "
            f"{'met' if max(worst.values()) <= GOAL else 'NOT met'} (worst: hostcheck job "
            f"{worst['job']:+.1%}, GPU sampling {worst['gpu']:+.1%})."
        )
    print(
        "\njob/bare: step time under hostcheck job (GPU sampling off) over bare (bare "
        "samples/s / job samples/s - 1), also as microseconds per batch; gpu/job: GPU sampling "
        f"on over off; medians of {args.rounds} runs each.{verdict} samples/s: what the "
        "scripts print (their epoch times); per round: the same from each round's runs (the "
        "machine's noise); CPU: user+system seconds of the whole process tree of one run "
        "(hostcheck job's start-up, watcher, GPU sampler, probe and report in 'job' and "
        "'gpu'). next-only: a loop of 60,000 batches that does nothing but next()."
    )
    print(sampler_line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
