"""`hostcheck healthcheck`: the fast verdict, the streaks kept on the host, the action on
Slurm, one line said, all inside a hard time budget."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import sys
import threading
import time

from hostcheck.commands.common import (
    UsageError,
    host_options,
    load,
    loader_assignments,
    profile_options,
)
from hostcheck.health.verdict import UNKNOWN, Verdict

DEFAULT_MEASUREMENTS = "/var/lib/hostcheck/report.json"
DEFAULT_STATE_DIR = "/var/lib/hostcheck/healthcheck"
DEFAULT_BUDGET_S = 30.0  # slurmd kills its HealthCheckProgram after 60 s
DEFAULT_MAX_DRAINED = 10.0  # percent of a partition
EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_UNKNOWN = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction) -> None:
    health = commands.add_parser(
        "healthcheck",
        help="fast verdict for Slurm's HealthCheckProgram or node-problem-detector",
        description="Check the settings now and take the slow measurements (loop, read test, "
        "Pillow benchmark, DCGM diagnostic) from the last full report while the host state "
        "they were measured on holds; a measured check drains only when it failed on "
        "--consecutive measurements in a row. With --slurm, drain this node with a reason "
        "starting 'hostcheck:' when it is unhealthy and resume it when healthy, only if "
        "hostcheck drained it. Prints one line. Exit 0 healthy, 1 unhealthy, 2 unknown (a "
        "check could not assess, bad usage, or the time budget ran out).",
    )
    profile_options(health)
    host_options(health)
    health.add_argument(
        "--measurements",
        default=DEFAULT_MEASUREMENTS,
        metavar="REPORT",
        help="the last full report, written with --reuse-measurements as the hostcheck role "
        f"does (default: {DEFAULT_MEASUREMENTS})",
    )
    health.add_argument(
        "--consecutive",
        type=int,
        default=2,
        metavar="N",
        help="measurements in a row a measured check must fail before it counts (default: 2); "
        "settings that fail count at once",
    )
    health.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help=f"where the streaks and the last verdict are kept (default: {DEFAULT_STATE_DIR})",
    )
    health.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"hard limit of the whole run, scontrol included (default: {DEFAULT_BUDGET_S:.0f}; "
        "slurmd kills the program at 60)",
    )
    health.add_argument(
        "--slurm", action="store_true", help="drain or resume this node through scontrol"
    )
    health.add_argument(
        "--node",
        metavar="NAME",
        help="Slurm node name (default: $SLURMD_NODENAME, which slurmd sets, else the short "
        "hostname)",
    )
    health.add_argument(
        "--scontrol", metavar="PATH", help="the scontrol to run (default: the one on PATH)"
    )
    health.add_argument(
        "--dry-run", action="store_true", help="with --slurm: say what would be done, do nothing"
    )
    health.add_argument(
        "--max-drained",
        type=float,
        default=DEFAULT_MAX_DRAINED,
        metavar="PERCENT",
        help="with --slurm: do not drain when hostcheck's own drains would then hold more than "
        "this share of a partition of the node (at least one node is always allowed; 0: no "
        f"cap; default: {DEFAULT_MAX_DRAINED:g}). A bad rule pushed fleet-wide is what it is for",
    )
    health.add_argument(
        "--textfile",
        metavar="PATH",
        help="also write the verdict as node_exporter textfile series to PATH "
        "(hostcheck_healthcheck_*), written atomically",
    )
    health.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        help="cut the line to N characters (node-problem-detector keeps 80 by default)",
    )


def _now() -> str:
    return (
        dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _fit(line: str, limit: int | None) -> str:
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 3] + "..."


class Budget:
    """The hard time limit: when it runs out, the run says so in its one line and exits 2,
    wherever it is (a check stuck on a hung mount, a silent controller)."""

    def __init__(self, seconds: float, prefix: str, limit: int | None) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.prefix = prefix
        self.limit = limit
        self.doing = "starting"
        self.state_dir: str | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Budget:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started) - 0.5

    def _expire(self) -> None:
        line = f"{self.prefix}unknown: the {self.seconds:g} s budget ran out while {self.doing}"
        sys.stdout.write(_fit(line, self.limit) + "\n")
        sys.stdout.flush()
        os._exit(EXIT_UNKNOWN)


def run(args: argparse.Namespace) -> int:
    from hostcheck import reuse
    from hostcheck.checks.base import RunOptions
    from hostcheck.health import state
    from hostcheck.health.verdict import decide
    from hostcheck.system import System

    profile = load(args, loader_assignments(args))
    if args.consecutive < 1:
        raise UsageError("--consecutive must be 1 or more")
    if not 0 < args.budget <= 3600:
        raise UsageError("--budget must be more than 0 and at most 3600 seconds")
    if args.max_length is not None and args.max_length < 20:
        raise UsageError("--max-length must be 20 or more")
    if args.dry_run and not args.slurm:
        raise UsageError("--dry-run needs --slurm")
    if not 0 <= args.max_drained <= 100:
        raise UsageError("--max-drained must be a percent from 0 to 100")
    # os.uname, not socket.gethostname: the same name, without importing socket (2 ms a run)
    node = args.node or os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    scontrol_program = args.scontrol or shutil.which("scontrol") or "/usr/bin/scontrol"
    prefix = f"hostcheck healthcheck {node}: "
    options = RunOptions(
        user=args.user, dataset_path=args.dataset_path, require_gpu=args.require_gpu
    )
    system = System()
    with Budget(args.budget, prefix, args.max_length) as budget:
        try:
            # a dry run keeps no state: it reads the last saved one (written atomically) and
            # need not wait for slurmd's own run, which may hold the lock right now
            with contextlib.nullcontext() if args.dry_run else state.locked(args.state_dir):
                kept, state_note = state.load(args.state_dir)
                budget.doing = "checking the settings"
                light, basis = reuse.light_run(
                    profile, options, system, system.read("/etc/os-release")
                )
                measuring = reuse.measuring_ids(light, profile)
                standing, why = reuse.standing_measurements(args.measurements, basis, profile)
                verdict = decide(
                    light.results,
                    measuring,
                    standing,
                    why,
                    kept.get("streaks") or {},
                    args.consecutive,
                )
                said, capped, done = _act(args, node, verdict, scontrol_program, budget)
                line = f"{prefix}{verdict.summary()}" + (f"; slurm: {said}" if said else "")
                if not args.dry_run:
                    budget.doing = "saving the state"
                    history, counts = state.recorded(
                        kept, done, verdict.cause_keys, dt.datetime.now(dt.timezone.utc)
                    )
                    state.save(
                        args.state_dir,
                        verdict.streaks,
                        {
                            "at": _now(),
                            "node": node,
                            "verdict": verdict.state,
                            "exit_code": verdict.exit_code,
                            "line": line,
                            "slurm": said,
                            "drain_capped": capped,
                            "measurements": verdict.measurements,
                            "duration_s": round(time.monotonic() - budget.started, 3),
                            "note": state_note,
                        },
                        history,
                        counts,
                    )
            if args.textfile and not args.dry_run:
                budget.doing = "writing the textfile"
                try:
                    _write_textfile(args.textfile, verdict, capped, counts)
                except OSError as exc:  # the verdict stands without its series
                    line += f"; textfile not written: {exc.strerror or exc}"
        except (state.Busy, OSError) as exc:
            line = f"{prefix}unknown: {exc}"
            print(_fit(line, args.max_length))
            return EXIT_UNKNOWN
    print(_fit(line, args.max_length))
    return verdict.exit_code


def _write_textfile(
    path: str, verdict: Verdict, capped: dict | None, counts: dict[str, int]
) -> None:
    from hostcheck.atomic import write_atomic

    lines = [
        "# HELP hostcheck_healthcheck_verdict 1 for the verdict of the last health check.",
        "# TYPE hostcheck_healthcheck_verdict gauge",
        *(
            f'hostcheck_healthcheck_verdict{{state="{state}"}} {int(verdict.state == state)}'
            for state in ("healthy", "unhealthy", "unknown")
        ),
        "# HELP hostcheck_healthcheck_drain_capped 1 when the node is unhealthy but was not "
        "drained: hostcheck's drains already hold the share of its partition the cap allows.",
        "# TYPE hostcheck_healthcheck_drain_capped gauge",
        f"hostcheck_healthcheck_drain_capped {int(capped is not None)}",
        "# HELP hostcheck_healthcheck_last_run_timestamp_seconds When the last health check ran.",
        "# TYPE hostcheck_healthcheck_last_run_timestamp_seconds gauge",
        f"hostcheck_healthcheck_last_run_timestamp_seconds {int(time.time())}",
        "# HELP hostcheck_healthcheck_actions_total The nodes' drains and resumes this health "
        "check made, since its state file began.",
        "# TYPE hostcheck_healthcheck_actions_total counter",
        *(
            f'hostcheck_healthcheck_actions_total{{action="{action}"}} {count}'
            for action, count in counts.items()
        ),
    ]
    write_atomic(path, "\n".join(lines) + "\n")


def _act(
    args, node: str, verdict: Verdict, program: str, budget: Budget
) -> tuple[str, dict | None, str]:
    """What was done on Slurm, in a few words ('' without --slurm), the cap that held a drain
    back (None when none did), and "drained" or "resumed" when the node was changed so."""
    if not args.slurm:
        return "", None, ""
    from dataclasses import asdict

    from hostcheck.health import slurm

    budget.doing = "asking the Slurm controller"
    try:
        acted = slurm.act(
            slurm.Scontrol(program, budget.left),
            node,
            verdict,
            args.dry_run,
            slurm.Cap(args.max_drained),
        )
    except slurm.SlurmError as exc:
        said = f"not told: {exc}"
        return said + (" (node left as it was)" if verdict.state != UNKNOWN else ""), None, ""
    capped = None
    if acted.capped is not None:
        capped = {**asdict(acted.capped), "percent": args.max_drained}
    return acted.said, capped, acted.done
