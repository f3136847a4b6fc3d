#!/usr/bin/env python3
"""Wall time of `hostcheck run --profile quick` next to Python's own start-up and, with
--nhc, LBNL Node Health Check running the equivalent checks (benchmarks/nhc-quick.conf),
measured alternately in one run (shared machines are noisy: compare ratios).

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
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "hostcheck run --profile quick": [*HOSTCHECK, "run", "--profile", "quick"],
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
    if args.nhc is not None:
        nhc = statistics.median(times["nhc (nhc-quick.conf)"])
        ratio = quick / nhc
        print(
            f"hostcheck / NHC: {quick:.3f} / {nhc:.3f} = {ratio:.2f}x "
            f"({'within' if ratio <= RATIO_GOAL else 'OVER'} the {RATIO_GOAL:.0f}x goal)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
