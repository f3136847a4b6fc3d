#!/usr/bin/env python3
"""The loop's measurements next to the arithmetic model (hostcheck.loop.theory), on a grid.

Calibrated busy samples (each burns `c` of CPU time), batch `b`, `w` workers, a step of `s`
(a wait, as on a GPU host): the model says min(w / (c*b), 1 / s) batches/s and a data-wait
of max(0, 1 - s*w / (c*b)) of step time (num_workers 0: 1 / (c*b + s)). Prints measured /
model for each point, with what the workers got of the CPU, so noise from other processes on
a shared machine shows where it happens.

    .venv/bin/python benchmarks/loop_vs_model.py [--seconds S] [--quick] [--shared]

It runs in a session of its own with a larger CPU share (benchmarks/isolate.py) unless
--shared is given: then it competes with whatever else runs here, as hostcheck does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import isolate

from hostcheck.loop import measure, theory
from hostcheck.loop.settings import LoopSettings

# (cost ms, batch, workers, step ms, prefetcher): points that fit 2 cores (w <= 2; the step
# is a sleep), both sides of the knee, and num_workers 0 with and without a prefetch thread.
GRID = [
    (5.0, 8, 0, 20, False),  # the tests' points (tests/unit/hostcheck/loop/test_theory.py) ...
    (10.0, 8, 1, 40, False),
    (10.0, 16, 2, 50, True),
    (5.0, 8, 2, 40, True),
    (2.0, 8, 0, 10, False),  # ... and smaller batches, where the ~1.5 ms hand-over of a
    (2.0, 8, 0, 10, True),  # batch from a worker (not in the model) weighs more
    (4.0, 8, 1, 10, False),
    (4.0, 8, 2, 8, False),
    (4.0, 8, 2, 8, True),
    (1.0, 32, 2, 12, True),
    (0.5, 64, 1, 20, True),
]
QUICK = GRID[:4]


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per point")
    parser.add_argument("--quick", action="store_true", help="four points only")
    parser.add_argument("--shared", action="store_true", help="no session of its own")
    args = parser.parse_args()
    if not args.shared:
        code = isolate.rerun_isolated()
        if code is not None:
            return code
    points = QUICK if args.quick else GRID
    print(
        f"load average before: {loadavg()}; {os.cpu_count()} CPUs; samples 3x32x32 uint8; "
        f"CPU share: {isolate.share()}"
    )
    header = (
        f"{'c ms':>5} {'b':>3} {'w':>2} {'s ms':>5} {'pref':>4} | {'batch/s':>8} {'model':>7} "
        f"{'ratio':>6} | {'wait':>6} {'model':>6} {'diff':>6} | {'wcpu':>5} {'wwait':>5}"
    )
    print(header)
    print("-" * len(header))
    ratios, diffs = [], []
    for cost_ms, batch, workers, step_ms, prefetcher in points:
        settings = LoopSettings(
            device="cpu",
            sample="busy",
            sample_cost_s=cost_ms / 1000,
            batch_size=batch,
            num_workers=workers,
            step_time=step_ms / 1000,
            prefetcher=prefetcher,
            seconds=args.seconds,
            sample_shape=(3, 32, 32),
            startup_both=False,
        )
        result = measure.run(settings)
        if result.failure is not None:
            print(
                f"{cost_ms:5.1f} {batch:3d} {workers:2d} {step_ms:5.0f}  failed: {result.failure}"
            )
            continue
        model = theory.predict(cost_ms / 1000, batch, workers, step_ms / 1000, prefetcher)
        ratio = theory.ratio(result.batches_per_s, model.batches_per_s)
        diff = result.data_wait_fraction - model.data_wait_fraction
        ratios.append(ratio)
        diffs.append(abs(diff))
        wait_cores = result.worker_cpu_wait_cores
        shown = "on" if prefetcher else "off"
        print(
            f"{cost_ms:5.1f} {batch:3d} {workers:2d} {step_ms:5.0f} {shown:>4}"
            f" | {result.batches_per_s:8.2f} {model.batches_per_s:7.2f} {ratio:6.3f}"
            f" | {result.data_wait_fraction:6.1%} {model.data_wait_fraction:6.1%} {diff:+6.1%}"
            f" | {result.worker_cpu_cores:5.2f} "
            f"{'-' if wait_cores is None else f'{wait_cores:.2f}':>5}"
        )
    if ratios:
        print(
            f"\nthroughput measured/model: median {statistics.median(ratios):.3f}, "
            f"min {min(ratios):.3f}, max {max(ratios):.3f}; data-wait |measured - model|: "
            f"median {statistics.median(diffs):.1%}, max {max(diffs):.1%}"
        )
    print(
        f"load average after: {loadavg()}. wcpu: cores the workers used; wwait: cores' worth "
        "of time they waited for a CPU (other processes).\nnum_workers 0 with the prefetch "
        "thread: the thread's busy samples hold the GIL, so the step, not the wait, absorbs "
        "the loading (its data-wait is not comparable)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
