#!/usr/bin/env python3
"""What one Ansible task costs on a sandbox host, with the host's zipimport cache
(tests/sandbox/zipimport_cache.py) and without it, measured in turn on the same host.

    sudo .venv/bin/python benchmarks/sandbox_task_cost.py [--tasks 30] [--repeats 3]

A playbook of --tasks trivial `command` tasks runs on one sandbox host; the host's CPU comes
from its own cgroup (cgroup2 cpu.stat), the controller's from ansible-playbook and its
children. "without" moves the cache's .pth file aside for that run, so the host's Python
compiles Ansible's module_utils on every task, as a host outside the sandbox does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fleet_cost import measured
from tests.integration.ansible import run_playbook
from tests.sandbox.fleet import SYSTEM_PYTHON_PATH, Fleet

PTH = f"/{SYSTEM_PYTHON_PATH}/sandbox-zipimport-cache.pth"


def host_cpu_seconds(fleet: Fleet, name: str) -> float:
    for root in fleet._cgroup_roots():
        stat = root / name / "cpu.stat"
        if stat.exists():
            usage = dict(line.split() for line in stat.read_text().splitlines())
            return int(usage["usage_usec"]) / 1e6
    raise SystemExit("no cgroup2 cpu.stat for the host: this machine has no cgroup2 hierarchy")


def switch(fleet: Fleet, host, command: str) -> None:
    """Turn the cache off or on (or check that it is on); a failure ends the benchmark."""
    done = fleet.ssh(host, command)
    if done.returncode != 0:
        raise SystemExit(f"{host.name}: {command}: {done.stderr.strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    task = "    - ansible.builtin.command: 'true'\n      changed_when: false\n"
    folder = tempfile.TemporaryDirectory(prefix="task-cost-")
    playbook = Path(folder.name) / "tasks.yml"
    playbook.write_text("- hosts: gpu_nodes\n  gather_facts: false\n  tasks:\n" + task * args.tasks)
    fleet = Fleet(instance="bench-task-cost", log=lambda message: None)
    per_task: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    try:
        (host,) = fleet.up(1)
        print(f"{args.tasks} trivial tasks on one {host.os} host, {args.repeats} rounds")
        print(f"{'cache':>8} {'host CPU s/task':>16} {'controller CPU s/task':>22}")
        for _ in range(args.repeats):
            for mode in ("with", "without"):
                off = mode == "without"
                switch(fleet, host, f"mv {PTH} {PTH}.off" if off else f"test -e {PTH}")
                before = host_cpu_seconds(fleet, host.name)
                run = measured(lambda: run_playbook(fleet, str(playbook)))
                used = host_cpu_seconds(fleet, host.name) - before
                if off:
                    switch(fleet, host, f"mv {PTH}.off {PTH}")
                if run.returncode != 0:
                    raise SystemExit(f"the playbook failed on {host.name} ({mode} the cache)")
                per_task[mode].append((used / args.tasks, run.cpu / args.tasks))
                print(f"{mode:>8} {used / args.tasks:16.3f} {run.cpu / args.tasks:22.3f}")
    finally:
        fleet.down(quiet=True)
        folder.cleanup()
    with_host = statistics.median(h for h, _ in per_task["with"])
    without_host = statistics.median(h for h, _ in per_task["without"])
    print(
        f"median host CPU per task: {with_host:.3f} s with the cache, {without_host:.3f} s "
        f"without = {with_host / without_host:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
