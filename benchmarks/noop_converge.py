#!/usr/bin/env python3
"""The no-op converge: site.yml on sandbox fleets that are already provisioned, with its cost
per host, and what that makes of a 1,000-host fleet.

    sudo .venv/bin/python benchmarks/noop_converge.py [--sizes 1 8 32] [--against REF]

Each fleet is fresh and provisioned once by site.yml (not counted; --first-forks hosts at a
time). Then site.yml runs again
--repeats times, changing nothing; for each run: wall time, the controller's CPU time
(ansible-playbook and its ssh clients) per host, and tasks per host (ok + skipped, from the
json callback). The best run counts. With --against REF the roles of git revision REF (a
worktree under .cache/bench/) run on the same fleet in turn with this checkout's, so the ratio
is measured side by side. Each revision's turn starts with a run that is not counted
("(settle)"), for what the other revision left that this one changes or checks again (a
revision whose hostcheck role keeps its own record of the host state runs hostcheck again after
a switch; this checkout and ff244ef take each other's, and their settle runs change nothing).
Edit nothing the roles read while it runs: the hostcheck role builds its wheel from this
checkout, so an edit of hostcheck/ makes the next run of either revision install and run it.

The projection to --project hosts at --forks is benchmarks/fleet_cost.py's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fleet_cost import Run, by_file_lines, measured, per_host_cpu, project
from tests import collection_link
from tests.integration.ansible import ANSIBLE_BIN, CHECKOUT_CONTROLLER, Controller, run_playbook
from tests.sandbox import oskinds
from tests.sandbox.fleet import CHECKOUT, Fleet


def converge(fleet: Fleet, controller: Controller, forks: int) -> Run:
    return measured(
        lambda: run_playbook(fleet, "site.yml", controller=controller, forks=forks, timeout=7200)
    )


def row(size: int, name: str, run: Run) -> str:
    return (
        f"{size:5} {name:>10} {run.wall:7.1f} {run.cpu / size:11.2f} {run.tasks:11.0f} "
        f"{run.changed:8}  {run.returncode}"
    )


def worktree(ref: str) -> Controller:
    """REF's checkout beside this one, linked as the collection the way make does."""
    folder = CHECKOUT / ".cache" / "bench" / ref.replace("/", "_")
    if not folder.exists():
        subprocess.run(["git", "-C", str(CHECKOUT), "worktree", "prune"], check=True)
        subprocess.run(
            ["git", "-C", str(CHECKOUT), "worktree", "add", "--detach", str(folder), ref],
            check=True,
            capture_output=True,
        )
    collection_link.ensure(folder)
    return Controller(ANSIBLE_BIN, folder, {"ANSIBLE_CONFIG": str(folder / "ansible.cfg")})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--os", default="debian12", help="OS kinds of the hosts, in turn")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument(
        "--first-forks",
        type=int,
        default=8,
        help="forks of the provisioning run (not measured): each host installs torch and runs "
        "the training loop then, some hundred MB of memory apiece",
    )
    parser.add_argument("--project", type=int, default=1000, help="hosts to project to")
    parser.add_argument("--against", metavar="REF", help="git revision to compare with")
    args = parser.parse_args()
    kinds = oskinds.parse(args.os)
    controllers = {"this": CHECKOUT_CONTROLLER}
    if args.against:
        controllers[args.against] = worktree(args.against)
    print(f"controller: {os.cpu_count()} cores; hosts: {args.os}; forks {args.forks}")
    print(
        f"{'hosts':>5} {'roles':>10} {'wall s':>7} {'CPU s/host':>11} {'tasks/host':>11} "
        f"{'changed':>8}  exit",
        flush=True,
    )
    best: dict[tuple[int, str], Run] = {}
    for size in args.sizes:
        fleet = Fleet(instance="bench-noop", os_kinds=kinds, log=lambda message: None)
        try:
            fleet.up(size)
            first = converge(fleet, CHECKOUT_CONTROLLER, min(args.forks, args.first_forks))
            print(row(size, "(first)", first), flush=True)
            last = "this"
            for _ in range(args.repeats):
                for name, controller in controllers.items():
                    if name != last:
                        settle = converge(fleet, controller, args.forks)
                        print(row(size, "(settle)", settle), flush=True)
                        last = name
                    run = converge(fleet, controller, args.forks)
                    print(row(size, name, run), flush=True)
                    kept = best.get((size, name))
                    if kept is None or run.wall < kept.wall:
                        best[(size, name)] = run
        finally:
            fleet.down(quiet=True)
    if args.against:
        print(f"\nbest no-op run, this checkout / {args.against}:")
        for size in args.sizes:
            this, other = best[(size, "this")], best[(size, args.against)]
            print(
                f"  {size:3} hosts: wall {this.wall:.1f} / {other.wall:.1f} s = "
                f"{this.wall / other.wall:.2f}; CPU per host {this.cpu / size:.2f} / "
                f"{other.cpu / size:.2f} s = {this.cpu / other.cpu:.2f}; tasks per host "
                f"{this.tasks:.0f} / {other.tasks:.0f}"
            )
    smallest, largest = min(args.sizes), max(args.sizes)
    one, most = best[(smallest, "this")], best[(largest, "this")]
    per_host = per_host_cpu(one, smallest, most, largest)
    print(f"\ntasks of one host in the best no-op run of this checkout on {smallest} host(s):")
    print("\n".join(by_file_lines(one)))
    print(
        f"\nprojection from the best no-op runs of this checkout on {smallest} and {largest} hosts:"
    )
    print("\n".join(project(one, per_host, args.project, args.forks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
