#!/usr/bin/env python3
"""First and second run of site.yml on fresh sandbox fleets of 1 and 3 hosts, or on one host of
each OS kind named.

    sudo .venv/bin/python benchmarks/site_runs.py [--sizes 1 3]
    sudo .venv/bin/python benchmarks/site_runs.py --os debian12,ubuntu2404,rocky9

The first run installs and builds (packages, pillow-simd, hostcheck); the second should only
look: its time is the cost of proving a host is still in shape.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.ansible import run_playbook
from tests.paths import MACHINE_CACHE
from tests.sandbox import oskinds
from tests.sandbox.fleet import Fleet

WHEEL_CACHE = MACHINE_CACHE / "pillow_simd" / "wheels"


def timed(fleet: Fleet) -> tuple[float, int, int]:
    start = time.monotonic()
    run = run_playbook(fleet, "site.yml")
    seconds = time.monotonic() - start
    changed = sum(s["changed"] for s in run.stats.values())
    return seconds, changed, run.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--os", help="one 1-host fleet per kind named, instead of --sizes")
    args = parser.parse_args()
    runs = (
        [(1, [kind]) for kind in oskinds.parse(args.os)]
        if args.os
        else [(size, None) for size in args.sizes]
    )
    cached = sorted(p.name for p in WHEEL_CACHE.glob("*/*.whl")) if WHEEL_CACHE.exists() else []
    print(
        f"pillow-simd wheels in the controller cache at the start: {len(cached)} "
        "(0: the first 1-host run builds one; later first runs copy it)"
    )
    print(
        f"{'hosts':>5} {'os':>10} {'first s':>8} {'changed':>8} {'second s':>9} {'changed':>8} "
        f"{'second/first':>13}  exit codes"
    )
    for size, kinds in runs:
        fleet = Fleet(instance="bench-site", os_kinds=kinds, log=lambda message: None)
        try:
            fleet.up(size)
            first, first_changed, rc1 = timed(fleet)
            second, second_changed, rc2 = timed(fleet)
        finally:
            fleet.down(quiet=True)
        print(
            f"{size:5} {kinds[0].name if kinds else 'debian12':>10} {first:8.1f} "
            f"{first_changed:8} {second:9.1f} {second_changed:8} "
            f"{second / first:13.2f}  {rc1} {rc2}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
