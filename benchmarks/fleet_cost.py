"""What one ansible-playbook run costs the controller per host, and what that makes of a large
fleet: shared by noop_converge.py and audit_scale.py.

The projection: the linear strategy runs each task on every host, --forks at a time, so one task
takes ceil(hosts / forks) rounds of the 1-host latency per task; the controller needs
(CPU per host x hosts) / wall cores to keep up with that. Tasks are counted per host as
ansible-playbook's recap counts them: a run_once task counts on the first host only, and the
projection runs it in every round (an upper bound where a playbook has many, as audit.yml).
"""

from __future__ import annotations

import collections
import math
import os
import resource
import time
from dataclasses import dataclass, field


@dataclass
class Run:
    wall: float
    cpu: float  # controller CPU seconds, ansible-playbook and its children
    tasks: float  # per host
    changed: int
    returncode: int
    by_file: dict[str, tuple[int, int]] = field(default_factory=dict)  # first host: ok, skipped


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(play) -> Run:
    """Run play() (which runs ansible-playbook with the json callback and returns its result).
    ansible-playbook writes and reads bytecode, as an installed venv has it: with a shell's
    PYTHONDONTWRITEBYTECODE (make unsets it; a shell may not) every run and every fork would
    compile ansible-core from its sources again (a no-op on 3 hosts: 7.7-8.4 controller
    CPU-seconds against 7.4-7.6)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    cpu, start = children_cpu(), time.monotonic()
    run = play()
    wall, cpu = time.monotonic() - start, children_cpu() - cpu
    stats = run.stats.values()
    tasks = sum(s["ok"] + s["skipped"] + s["failures"] for s in stats) / max(len(stats), 1)
    changed = sum(s["changed"] for s in stats)
    return Run(wall, cpu, tasks, changed, run.returncode, tasks_by_file(run.output))


def tasks_by_file(output: dict) -> dict[str, tuple[int, int]]:
    """Tasks (ok, skipped) of the first host by the role task file (or play) they come from."""
    ok: collections.Counter = collections.Counter()
    skipped: collections.Counter = collections.Counter()
    first = min(output.get("stats") or {"": None})
    for play in output.get("plays", []):
        for task in play["tasks"]:
            result = task["hosts"].get(first)
            if result is None:
                continue
            path = task["task"].get("path", "")
            where = (
                path.split("/roles/", 1)[1].split(":", 1)[0]
                if "/roles/" in path
                else f"play: {play['play']['name']}"
            )
            (skipped if result.get("skipped") else ok)[where] += 1
    return {where: (ok[where], skipped[where]) for where in sorted(ok.keys() | skipped.keys())}


def by_file_lines(run: Run) -> list[str]:
    return [
        f"  {where:48} {ok:4} ok {skipped:4} skipped"
        for where, (ok, skipped) in run.by_file.items()
    ]


def per_host_cpu(small: Run, small_hosts: int, large: Run, large_hosts: int) -> float:
    """The controller CPU each further host adds (the slope between two fleet sizes)."""
    if large_hosts > small_hosts:
        return (large.cpu - small.cpu) / (large_hosts - small_hosts)
    return small.cpu / small_hosts


def project(one: Run, per_host: float, hosts: int, forks: int) -> list[str]:
    """one: the best run on the smallest fleet; per_host: per_host_cpu()."""
    latency = one.wall / one.tasks
    rounds = math.ceil(hosts / forks)
    wall = one.tasks * rounds * latency
    fixed = max(one.cpu - per_host, 0.0)
    cpu = fixed + per_host * hosts
    return [
        f"  1-host latency per task: {one.wall:.1f} s / {one.tasks:.0f} tasks = {latency:.3f} s",
        f"  {hosts} hosts at forks {forks}: {one.tasks:.0f} tasks x ceil({hosts}/{forks}) = "
        f"{rounds} rounds x {latency:.3f} s = {wall:.0f} s ({wall / 60:.1f} min) of wall time",
        f"  controller CPU: {fixed:.1f} s once + {per_host:.2f} s per host x {hosts} = "
        f"{cpu:.0f} s, so {cpu:.0f} / {wall:.0f} = {cpu / wall:.1f} cores to keep up",
    ]
