#!/usr/bin/env python3
"""Wall time of `hostcheck run --profile quick` on this machine, next to Python's own start-up
and an `import torch`, measured in the same run (shared machines are noisy: compare ratios).

    .venv/bin/python benchmarks/quick_profile.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 2.0
HOSTCHECK = [sys.executable, "-m", "hostcheck"]


def wall(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
        "hostcheck run --profile quick": [*HOSTCHECK, "run", "--profile", "quick"],
        "hostcheck run (default profile)": [*HOSTCHECK, "run"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    codes: dict[str, set[int]] = {name: set() for name in cases}
    for _ in range(args.repeat):  # interleaved, so drift hits every case alike
        for name, argv in cases.items():
            seconds, code = wall(argv)
            times[name].append(seconds)
            codes[name].add(code)
    base = statistics.median(times["python -c pass"])
    print(f"{'command':34} {'median s':>9} {'min s':>7} {'x python':>9}  exit codes")
    for name in cases:
        median = statistics.median(times[name])
        print(
            f"{name:34} {median:9.3f} {min(times[name]):7.3f} {median / base:9.1f}  "
            f"{sorted(codes[name])}"
        )
    quick = statistics.median(times["hostcheck run --profile quick"])
    verdict = "within" if quick < BUDGET_S else "OVER"
    print(
        f"\nquick profile: {quick:.3f} s median, {quick / BUDGET_S:.0%} of the {BUDGET_S:.0f} s "
        f"budget ({verdict}); repeats: {args.repeat}; cwd {Path.cwd()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
