#!/usr/bin/env python3
"""Wall time of playbooks/audit.yml with the quick profile on sandbox fleets of 1, 4 and 16 hosts.

    sudo .venv/bin/python benchmarks/audit_scale.py [--sizes 1 4 16] [--repeats 2]

Each fleet is fresh; hostcheck is installed by the hostcheck role alone (site.yml --tags
hostcheck, hostcheck_run false: torch and hostcheck into the venv, not timed). Then the audit
runs --repeats times (ansible-playbook end to end: validation, hostcheck on every host, fetch,
markers, hostcheck fleet); the best run counts, with its controller CPU per host and tasks per
host. The ratio is against the 1-host time: with the hosts audited in parallel it should grow
far slower than the host count. All hosts share this machine's cores, so hostcheck's own work
does add up. Last, the audit of --project hosts at --forks, projected from the smallest and the
largest fleet as benchmarks/fleet_cost.py does it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fleet_cost import Run, measured, per_host_cpu, project
from tests.integration.ansible import run_playbook
from tests.sandbox.fleet import Fleet


def audit(fleet: Fleet, reports: Path, forks: int) -> tuple[Run, dict]:
    run = measured(
        lambda: run_playbook(
            fleet,
            "playbooks/audit.yml",
            extra_vars={"audit_reports_dir": str(reports), "audit_profile": "quick"},
            forks=forks,
        )
    )
    folder = max(p for p in reports.iterdir() if p.is_dir())
    verdicts = json.loads((folder / ".fleet.json").read_text())["verdicts"]
    return run, {k: v for k, v in verdicts.items() if v}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--project", type=int, default=1000, help="hosts to project to")
    args = parser.parse_args()
    print(
        f"{'hosts':>5} {'install s':>10} {'audit s (each run)':>22} {'best s':>7} "
        f"{'x 1 host':>9} {'CPU s/host':>11} {'tasks/host':>11}  verdicts, exit code",
        flush=True,
    )
    base = None
    best: dict[int, Run] = {}
    for size in args.sizes:
        fleet = Fleet(instance="bench-audit", log=lambda message: None)
        try:
            fleet.up(size)
            start = time.monotonic()
            install = run_playbook(
                fleet, "site.yml", tags="hostcheck", extra_vars={"hostcheck_run": False}
            )
            installed = time.monotonic() - start
            if install.returncode != 0:
                print(f"{size}: installing hostcheck failed: {install.stderr[-2000:]}")
                return 1
            with tempfile.TemporaryDirectory(prefix="audit-scale-") as scratch:
                runs = [audit(fleet, Path(scratch), args.forks) for _ in range(args.repeats)]
        finally:
            fleet.down(quiet=True)
        kept = best[size] = min((run for run, _ in runs), key=lambda run: run.wall)
        base = base or kept.wall
        each = " ".join(f"{run.wall:.1f}" for run, _ in runs)
        last, verdicts = runs[-1]
        print(
            f"{size:5} {installed:10.1f} {each:>22} {kept.wall:7.1f} {kept.wall / base:9.2f} "
            f"{kept.cpu / size:11.2f} {kept.tasks:11.0f}  {json.dumps(verdicts)}, "
            f"{last.returncode}",
            flush=True,
        )
    smallest, largest = min(args.sizes), max(args.sizes)
    per_host = per_host_cpu(best[smallest], smallest, best[largest], largest)
    print(f"\nprojection from the best audits of {smallest} and {largest} hosts:")
    print("\n".join(project(best[smallest], per_host, args.project, args.forks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
