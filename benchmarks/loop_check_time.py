#!/usr/bin/env python3
"""Wall time of the `loop` check (`hostcheck run --check loop`, default profile) against its
30 s budget, with what the loop measured, over a few runs.

    .venv/bin/python benchmarks/loop_check_time.py [--repeat N] [--profile NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_S = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", default="default")
    args = parser.parse_args()
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "loop.json"
        for run in range(1, args.repeat + 1):
            start = time.perf_counter()
            argv = ["run", "--profile", args.profile, "--check", "loop"]
            done = subprocess.run(
                [sys.executable, "-m", "hostcheck", *argv, "--report", f"json:{report}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            wall = time.perf_counter() - start
            walls.append(wall)
            (check,) = json.loads(report.read_text())["checks"]
            result = check["data"].get("result") or {}
            print(
                f"run {run}: {wall:5.2f} s wall (check {check['duration_s']:.2f} s), exit "
                f"{done.returncode}, {check['status']}: {check['summary']}"
            )
            if result:
                print(
                    f"       workers {result['settings']['num_workers']}, sample "
                    f"{1000 * (result['worker_cpu_per_sample_s'] or 0):.2f} ms of worker CPU, "
                    f"{result['batches']} measured steps, worker CPU "
                    f"{result['worker_cpu_cores']:.2f} cores, waited for a CPU "
                    f"{result['worker_cpu_wait_cores'] or 0:.2f}"
                )
    median = statistics.median(walls)
    print(
        f"\nloop check: median {median:.2f} s, max {max(walls):.2f} s wall = "
        f"{max(walls) / BUDGET_S:.0%} of the {BUDGET_S:.0f} s budget "
        f"({'within' if max(walls) < BUDGET_S else 'OVER'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
