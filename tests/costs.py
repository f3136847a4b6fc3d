"""What each test module costs: wall time and CPU time, written by every suite run to a ledger
under .cache/test-costs/, and printed ranked by cost.

    python -m tests.costs [LEDGER] [--top N]   # the newest run's ledger unless one is named
    python -m tests.costs --runs [LEDGER]      # its ansible-playbook runs, by module and playbook
    python -m tests.costs --tasks [LEDGER]     # the tasks of those runs, by the time they took

A module's CPU is everything its pytest worker and what it started spent while the module ran:
the worker moves itself into a cgroup of its own (cgroup v2, on this machine's unified
hierarchy), under which the fleets' hosts make theirs (tests/sandbox/fleet.py), so the
cgroup's usage counts the worker, ansible-playbook, ssh, and every process of every host,
once. Where no cgroup can be made (not root, no cgroup v2), it is the worker's own CPU and
that of the children it waited for, which misses the hosts.

Each ansible-playbook run of a test (tests/integration/ansible.py run_playbook) adds a line of
its own: the module, the playbook, its tags, check mode, the hosts it ran on, their tasks and
changes, its wall time, the controller's CPU (ansible-playbook and its forks), the CPU of the
whole worker's cgroup while it ran (the controller and every host), and each task's wall time
(from the start of the task to its last host's result, summed over tasks of the same name).

Each run's first line records the machine's pace (PACE_WORK, a fixed pure-Python workload,
the best of five), so ledgers of different machines can be compared: divide by the pace.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from tests.paths import CHECKOUT

LEDGERS = CHECKOUT / ".cache" / "test-costs"
LEDGER_ENVIRONMENT = "HOSTCHECK_COST_LEDGER"
UNIFIED = Path("/sys/fs/cgroup/unified")  # hybrid hierarchy; /sys/fs/cgroup on a pure v2 one
NAMED_SYSTEMD = Path("/sys/fs/cgroup/systemd")  # systemd's own, on a hybrid hierarchy
# SSH logins to sandbox hosts this process made (tests/sandbox/fleet.py ssh_argv counts them):
# a module line's ssh_logins
SSH_LOGINS = [0]


def pace_seconds(repeat: int = 5) -> float:
    """Seconds for a fixed CPU-bound workload (Python bytecode and sha256), best of `repeat`:
    about 0.15 s on the machine of docs/development.md's table."""
    best = float("inf")
    block = bytes(range(256)) * 4096
    for _ in range(repeat):
        start = time.perf_counter()
        total = 0
        for number in range(400_000):
            total += number * number % 7
        digest = hashlib.sha256()
        for _ in range(64):
            digest.update(block)
        best = min(best, time.perf_counter() - start)
    return best


def rusage_cpu_seconds(who: int) -> float:
    """User and system CPU of this process (RUSAGE_SELF) or of the children it waited for."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _cgroup_v2_root() -> Path | None:
    for mount in (UNIFIED, Path("/sys/fs/cgroup")):
        if (mount / "cgroup.procs").exists() and (mount / "cpu.stat").exists():
            return mount
    return None


def _hierarchies() -> list[tuple[Path, str]]:
    """(mount, this process's path) of the cgroup v2 hierarchy and, on a hybrid one, of
    systemd's named hierarchy: systemd-nspawn keeps a host's path the same in both, so the
    meter moves this process in both."""
    unified = _cgroup_v2_root()
    if unified is None:
        return []
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0":
            found.append((unified, path))
        elif controllers == "name=systemd" and NAMED_SYSTEMD.is_dir() and unified == UNIFIED:
            found.append((NAMED_SYSTEMD, path))
    return found


class CpuMeter:
    """CPU seconds spent by this process and everything it started since it was made."""

    def __init__(self, name: str | None = None) -> None:
        self.cgroup: Path | None = None  # the own one in the v2 hierarchy, read for CPU
        self.moved: list[tuple[Path, Path]] = []  # (own cgroup, the one left) per hierarchy
        self.name = name or f"hostcheck-tests-{os.getpid()}"
        if os.geteuid() != 0:
            return
        name = self.name
        for mount, path in _hierarchies():
            parent = mount / path.lstrip("/")
            try:
                (parent / name).mkdir(exist_ok=True)
                (parent / name / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                with contextlib.suppress(OSError):
                    (parent / name).rmdir()
                self.close()
                return
            self.moved.append((parent / name, parent))
        unified = _cgroup_v2_root()
        self.cgroup = next((own for own, _ in self.moved if own.is_relative_to(unified)), None)

    def seconds(self) -> float:
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                return cgroup_cpu_seconds(self.cgroup)
        return sum(map(rusage_cpu_seconds, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

    @property
    def source(self) -> str:
        return "cgroup" if self.cgroup is not None else "rusage"

    def close(self) -> None:
        """Back to the cgroups this process came from; the own ones go when nothing is left in
        them (a fleet a crashed test left keeps them, and a later run's close removes them)."""
        for _, parent in self.moved:
            with contextlib.suppress(OSError):
                (parent / "cgroup.procs").write_text(str(os.getpid()))
        self.moved, self.cgroup = [], None
        remove_empty_cgroups(self.name)


def remove_empty_cgroups(pattern: str) -> None:
    """The meters' cgroups named by `pattern` (a glob) under this process's own, where nothing
    runs any more (their empty children first: systemd's named hierarchy keeps the folders of
    stopped hosts)."""
    for mount, path in _hierarchies():
        for own in (mount / path.lstrip("/")).glob(pattern):
            for folder in [*sorted(own.rglob("*"), key=lambda p: -len(p.parts)), own]:
                if folder.is_dir():
                    with contextlib.suppress(OSError):
                        folder.rmdir()


@dataclass
class ModuleCost:
    module: str
    worker: str
    start: float
    wall_s: float = 0.0
    cpu_s: float = 0.0
    ssh_logins: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


class Ledger:
    """Per-module costs of one pytest process, appended to the run's ledger file (one JSON
    object a line; workers of one run write to the same file, a line at a time)."""

    def __init__(self, path: Path, worker: str) -> None:
        self.path = path
        self.worker = worker
        self.meter = CpuMeter(meter_name(path, os.getpid()))
        self.current: ModuleCost | None = None
        self._cpu_at_start = 0.0
        self._logins_at_start = 0

    def start(self, module: str) -> None:
        self.current = ModuleCost(module, self.worker, time.time())
        self._cpu_at_start = self.meter.seconds()
        self._logins_at_start = SSH_LOGINS[0]

    def outcome(self, module: str, outcome: str) -> None:
        if self.current is not None and self.current.module == module:
            self.current.outcomes[outcome] = self.current.outcomes.get(outcome, 0) + 1

    def finish(self) -> None:
        if self.current is None:
            return
        cost = self.current
        cost.wall_s = round(time.time() - cost.start, 3)
        cost.cpu_s = round(self.meter.seconds() - self._cpu_at_start, 3)
        cost.ssh_logins = SSH_LOGINS[0] - self._logins_at_start
        self.current = None
        write_line(self.path, {"cpu_source": self.meter.source, **asdict(cost)})

    def close(self) -> None:
        self.finish()
        self.meter.close()


def meter_name(ledger: Path, pid: int | str) -> str:
    """The cgroup of a run's process: the run's ledger and the process named."""
    return f"hostcheck-tests-{ledger.stem}-{pid}"


def write_line(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)  # one write of an appended line: workers never interleave
    finally:
        os.close(descriptor)


def cgroup_cpu_seconds(cgroup: Path) -> float:
    for line in (cgroup / "cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    raise OSError(f"{cgroup}/cpu.stat has no usage_usec")


def own_cgroup_cpu_seconds() -> float | None:
    """CPU seconds of this process's cgroup v2 (a worker's meter: it and all it started)."""
    unified = _cgroup_v2_root()
    if unified is None:
        return None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, _, path = line.split(":", 2)
        if number == "0":
            with contextlib.suppress(OSError):
                return cgroup_cpu_seconds(unified / path.lstrip("/"))
    return None


def record_playbook_run(record: dict) -> None:
    """One playbook run's line in the run's ledger, when the suite keeps one."""
    ledger = os.environ.get(LEDGER_ENVIRONMENT)
    if ledger:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        write_line(Path(ledger), {"playbook_run": record, "test": test})


def task_seconds(output: dict) -> dict[str, float]:
    """Each task's wall time in a run's json-callback output, summed by task name (a role's
    task is named "role : task")."""
    seconds: dict[str, float] = {}
    for play in output.get("plays", []):
        for task in play.get("tasks", []):
            duration = task["task"].get("duration", {})
            if "end" not in duration:
                continue
            took = (
                datetime.fromisoformat(duration["end"]) - datetime.fromisoformat(duration["start"])
            ).total_seconds()
            name = task["task"]["name"]
            seconds[name] = round(seconds.get(name, 0.0) + took, 2)
    return seconds


def new_ledger(argv: list[str], **facts) -> Path:
    """The ledger of a run starting now, its first line the machine's pace, the command and
    the facts given (the commit, the selection)."""
    path = LEDGERS / time.strftime("run-%Y%m%d-%H%M%S.jsonl")
    write_line(
        path,
        {
            "run": path.stem,
            "start": time.time(),
            "pace_s": round(pace_seconds(), 4),
            "argv": argv,
            "cpus": os.cpu_count(),
            "load": os.getloadavg()[0],
            **facts,
        },
    )
    return path


def end_ledger(path: Path, exitstatus: int) -> None:
    head, _ = read(path)
    write_line(path, {"exitstatus": exitstatus, "start": head.get("start"), "end": time.time()})


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def playbook_runs(path: Path) -> list[dict]:
    lines = _records(path)
    return [
        {"test": line["test"], **line["playbook_run"]} for line in lines if "playbook_run" in line
    ]


def runs_table(path: Path, top: int | None = None) -> str:
    """The ansible-playbook runs grouped by module and playbook (and tags, check mode), ranked
    by the CPU spent while they ran."""
    groups: dict[tuple, dict] = {}
    for run in playbook_runs(path):
        module = run["test"].split("::")[0]
        key = (module, run["playbook"], run.get("tags") or "", "check" if run.get("check") else "")
        group = groups.setdefault(key, {"runs": 0, "host_runs": 0, "tasks": 0, "wall_s": 0.0,
                                        "controller_cpu_s": 0.0, "cpu_s": 0.0})  # fmt: skip
        group["runs"] += 1
        group["host_runs"] += run["hosts"]
        group["tasks"] += run["tasks"]
        for name in ("wall_s", "controller_cpu_s", "cpu_s"):
            group[name] += run.get(name) or 0.0
    ranked = sorted(groups.items(), key=lambda item: -item[1]["cpu_s"])
    total = sum(group["cpu_s"] for _, group in ranked)
    controller = sum(group["controller_cpu_s"] for _, group in ranked)
    rows = [
        f"{path.name}: {sum(g['runs'] for _, g in ranked)} ansible-playbook runs, "
        f"{sum(g['host_runs'] for _, g in ranked)} host runs, CPU while they ran "
        f"{total / 60:.1f} min (controller {controller / 60:.1f})",
        f"{'CPU min':>8} {'ctl min':>8} {'wall min':>8} {'runs':>5} {'hosts':>5} "
        f"{'tasks/host':>10}  module  playbook [tags] [check]",
    ]
    for (module, playbook, tags, check), group in ranked[:top]:
        per_host = group["tasks"] / group["host_runs"] if group["host_runs"] else 0
        rows.append(
            f"{group['cpu_s'] / 60:8.2f} {group['controller_cpu_s'] / 60:8.2f} "
            f"{group['wall_s'] / 60:8.2f} {group['runs']:5} {group['host_runs']:5} "
            f"{per_host:10.0f}  {module}  {playbook}"
            + (f" [{tags}]" if tags else "")
            + (f" [{check}]" if check else "")
        )
    return "\n".join(rows)


def tasks_table(path: Path, top: int | None = None) -> str:
    """The tasks of every playbook run, grouped by name, ranked by the wall time they took."""
    groups: dict[str, dict] = {}
    for run in playbook_runs(path):
        module = run["test"].split("::")[0]
        for name, seconds in (run.get("task_s") or {}).items():
            group = groups.setdefault(name, {"seconds": 0.0, "runs": 0, "modules": set()})
            group["seconds"] += seconds
            group["runs"] += 1
            group["modules"].add(module)
    ranked = sorted(groups.items(), key=lambda item: -item[1]["seconds"])
    total = sum(group["seconds"] for _, group in ranked)
    rows = [
        f"{path.name}: {len(ranked)} task names, {total / 60:.1f} min of task wall time",
        f"{'wall min':>8} {'share':>6} {'runs':>5} {'modules':>7}  task",
    ]
    for name, group in ranked[:top]:
        rows.append(
            f"{group['seconds'] / 60:8.2f} {group['seconds'] / (total or 1):6.1%} "
            f"{group['runs']:5} {len(group['modules']):7}  {name}"
        )
    return "\n".join(rows)


def read(path: Path) -> tuple[dict, list[dict]]:
    lines = _records(path)
    head = lines[0] if lines and "run" in lines[0] else {}
    return head, [line for line in lines if "module" in line]


def run_end(path: Path) -> dict | None:
    """The run's last line, written when it finished: its exit status, start and end."""
    ends = [json.loads(line) for line in path.read_text().splitlines() if '"exitstatus"' in line]
    return ends[-1] if ends else None


def table(path: Path, top: int | None = None) -> str:
    """The modules ranked by CPU, with wall time, tests and outcomes, and the run's totals."""
    head, modules = read(path)
    modules.sort(key=lambda cost: -cost["cpu_s"])
    total_cpu = sum(cost["cpu_s"] for cost in modules) or 1.0
    starts = [cost["start"] for cost in modules]
    ends = [cost["start"] + cost["wall_s"] for cost in modules]
    span = (max(ends) - min(starts)) if modules else 0.0
    rows = [
        f"{path.name}: pace {head.get('pace_s', '?')} s (tests/costs.py pace_seconds), "
        f"{len(modules)} modules, first to last {span / 60:.1f} min, "
        f"CPU {total_cpu / 60:.1f} min",
        f"{'CPU min':>8} {'share':>6} {'wall min':>8} {'tests':>6} {'logins':>6}  module",
    ]
    for cost in modules[:top]:
        outcomes = cost["outcomes"]
        failed = outcomes.get("failed", 0)
        rows.append(
            f"{cost['cpu_s'] / 60:8.2f} {cost['cpu_s'] / total_cpu:6.1%} "
            f"{cost['wall_s'] / 60:8.2f} {sum(outcomes.values()):6} "
            f"{cost.get('ssh_logins', 0):6}  {cost['module']}"
            + (f"  ({failed} failed)" if failed else "")
        )
    if top is not None and len(modules) > top:
        rest = modules[top:]
        rows.append(
            f"{sum(c['cpu_s'] for c in rest) / 60:8.2f} "
            f"{sum(c['cpu_s'] for c in rest) / total_cpu:6.1%} "
            f"{sum(c['wall_s'] for c in rest) / 60:8.2f} "
            f"{sum(sum(c['outcomes'].values()) for c in rest):6} "
            f"{sum(c.get('ssh_logins', 0) for c in rest):6}  ({len(rest)} more modules)"
        )
    return "\n".join(rows)


def newest() -> Path | None:
    ledgers = sorted(LEDGERS.glob("run-*.jsonl"))
    return ledgers[-1] if ledgers else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledger", nargs="?", type=Path, help="a ledger file (default: newest)")
    parser.add_argument("--top", type=int, default=None, help="only the N costliest rows")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--runs", action="store_true", help="the ansible-playbook runs instead")
    shown.add_argument("--tasks", action="store_true", help="the playbook runs' tasks instead")
    args = parser.parse_args(argv)
    path = args.ledger or newest()
    if path is None or not path.is_file():
        print(f"tests.costs: no ledger {'at ' + str(path) if path else 'in ' + str(LEDGERS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    shown = runs_table if args.runs else tasks_table if args.tasks else table
    print(shown(path, args.top))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly, as it does `cat`
    sys.exit(main())
