#!/usr/bin/env python3
"""Wall time of `hostcheck run --profile quick` and of `hostcheck healthcheck` (the same checks,
the last full report's measurements read and the state kept, as Slurm's HealthCheckProgram runs
it, without scontrol) next to Python's own start-up and, with --nhc, LBNL Node Health Check
running the equivalent checks (benchmarks/nhc-quick.conf), measured alternately in one run
(shared machines are noisy: compare ratios).

    .venv/bin/python benchmarks/quick_profile.py [--repeat N] [--nhc PATH-TO-nhc]

hostcheck runs as it does when installed: from compiled bytecode (a first unmeasured run
writes it, whatever PYTHONDONTWRITEBYTECODE says).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_S = 0.35  # issue goal: at most 0.35 s and at most 2x NHC
RATIO_GOAL = 2.0
HEALTH_BUDGET_S = 2.0  # the health check's goal: at most 2 s and at most 1.5x NHC
HEALTH_RATIO_GOAL = 1.5
HERE = Path(__file__).resolve().parent
HOSTCHECK = [sys.executable, "-m", "hostcheck"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, check=False
    )
    return time.perf_counter() - start, done.returncode


def nhc_case(nhc: Path, state: str) -> list[str]:
    return [
        str(nhc), "-D", state, "-c", str(HERE / "nhc-quick.conf"), "-l", f"{state}/log",
        "-a", f"INCDIR={nhc.parent / 'scripts'}",
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--nhc", type=Path, help="the nhc script of an LBNL NHC checkout")
    args = parser.parse_args()
    if args.nhc is not None and not (args.nhc.is_file() and (args.nhc.parent / "scripts").is_dir()):
        parser.error(f"--nhc {args.nhc}: not an nhc script with a scripts/ folder beside it")
    state = tempfile.mkdtemp(prefix="nhc-")
    report = f"{state}/report.json"  # the full report the health check takes measurements from
    full = [*HOSTCHECK, "run", "--profile", "quick", "--reuse-measurements", report]
    subprocess.run([*full, "--report", f"json:{report}"], capture_output=True, env=ENV, check=False)
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "hostcheck run --profile quick": [*HOSTCHECK, "run", "--profile", "quick"],
        "hostcheck healthcheck": [
            *HOSTCHECK,
            "healthcheck",
            "--profile",
            "quick",
            "--measurements",
            report,
            "--state-dir",
            f"{state}/healthcheck",
        ],
    }
    if args.nhc is not None:
        cases["nhc (nhc-quick.conf)"] = nhc_case(args.nhc, state)
    for argv in cases.values():  # bytecode written, caches warm
        wall(argv)
    times: dict[str, list[float]] = {name: [] for name in cases}
    codes: dict[str, set[int]] = {name: set() for name in cases}
    for _ in range(args.repeat):  # alternating, so drift hits every case alike
        for name, argv in cases.items():
            seconds, code = wall(argv)
            times[name].append(seconds)
            codes[name].add(code)
    print(f"{'command':32} {'median s':>9} {'min s':>7}  exit codes")
    for name in cases:
        median = statistics.median(times[name])
        print(f"{name:32} {median:9.3f} {min(times[name]):7.3f}  {sorted(codes[name])}")
    quick = statistics.median(times["hostcheck run --profile quick"])
    print(
        f"\nquick profile: {quick:.3f} s median ({'within' if quick <= BUDGET_S else 'OVER'} "
        f"the {BUDGET_S} s goal); repeats: {args.repeat}"
    )
    health = statistics.median(times["hostcheck healthcheck"])
    print(
        f"health check: {health:.3f} s median "
        f"({'within' if health <= HEALTH_BUDGET_S else 'OVER'} the {HEALTH_BUDGET_S} s goal)"
    )
    if args.nhc is not None:
        nhc = statistics.median(times["nhc (nhc-quick.conf)"])
        for name, seconds, goal in (
            ("hostcheck run --profile quick", quick, RATIO_GOAL),
            ("hostcheck healthcheck", health, HEALTH_RATIO_GOAL),
        ):
            ratio = seconds / nhc
            print(
                f"{name} / NHC: {seconds:.3f} / {nhc:.3f} = {ratio:.2f}x "
                f"({'within' if ratio <= goal else 'OVER'} the {goal:g}x goal)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
