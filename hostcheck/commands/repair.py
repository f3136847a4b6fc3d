"""`hostcheck repair plan|verify|reboot|record|nodes`: the host's side of playbooks/repair.yml.
plan prints what a repair may do about a report's failing checks (hostcheck.health.repair) as
JSON; verify checks the host again after a repair, keeps each cause it set right in the health
check's history (state.json, under its lock) and, when the host passes, resumes the node if
hostcheck drained it; reboot asks Slurm to reboot the node where it can; record keeps a repair
in the history; nodes prints Slurm's nodes as the repair reads them (drained, by whom). Like
the health check, they tell Slurm through this host's own scontrol, and only about hostcheck's
own drains."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys

from hostcheck.commands.common import EXIT_OK, UsageError
from hostcheck.commands.healthcheck import DEFAULT_STATE_DIR

DEFAULT_REPORT = "/var/lib/hostcheck/report.json"
DEFAULT_WINDOW_DAYS = 7.0  # the same cause back within a week is not something a role fixes
SCONTROL_SECONDS = 30.0  # for each scontrol call
# slurmd kills its HealthCheckProgram after 60 s: a health check holds the state's lock no longer
STATE_LOCK_WAIT_S = 60.0


def add_parser(commands: argparse._SubParsersAction) -> None:
    repair = commands.add_parser(
        "repair",
        help="what a repair may do about a report's failures; check it, resume, record it",
        description="plan: from a report (hostcheck run's JSON), each failing finding's fix: "
        "the roles "
        "whose variables its remedy names, a reboot where a GPU reset or a reboot clears it, "
        "else a person; a cause repaired before within --window-days goes to a person. "
        "verify: run hostcheck again, keep each --cause it set right in the health check's "
        "history, and when it passes resume the node if hostcheck drained it. reboot: ask "
        "Slurm to reboot the node and resume it, where slurm.conf has a RebootProgram. "
        "record: keep a repair in the history. nodes: Slurm's nodes (state, reason, drained "
        "by hostcheck). Each prints JSON. Exit 0; 2 on bad usage, an unreadable report, "
        "hostcheck run leaving no report, or scontrol failing.",
    )
    actions = repair.add_subparsers(dest="repair_action", metavar="ACTION", required=True)
    plan = actions.add_parser("plan", help="print what a repair may do, as JSON")
    plan.add_argument(
        "--report",
        default=DEFAULT_REPORT,
        metavar="FILE",
        help=f"the host's report, as hostcheck run --report json: writes it; - reads it from "
        f"standard input (default: {DEFAULT_REPORT}; not with -- RUN_ARGS)",
    )
    plan.add_argument(
        "--window-days",
        type=float,
        default=DEFAULT_WINDOW_DAYS,
        metavar="DAYS",
        help="a cause repaired within this many days is left to a person (default: "
        f"{DEFAULT_WINDOW_DAYS:g})",
    )
    verify = actions.add_parser(
        "verify",
        help="run hostcheck after a repair; record the causes it set right; resume the node "
        "if it passes",
    )
    verify.add_argument(
        "--resume", metavar="NODE", help="resume this node if hostcheck drained it and it passes"
    )
    reboot = actions.add_parser(
        "reboot",
        help="ask Slurm to reboot a node and resume it (scontrol reboot ASAP nextstate=RESUME) "
        "if slurm.conf has a RebootProgram and no one else drained it",
    )
    reboot.add_argument("name", metavar="NODE")
    reboot.add_argument("--reason", required=True, help="the reason Slurm shows meanwhile")
    record = actions.add_parser("record", help="keep a repair in the health check's history")
    nodes = actions.add_parser("nodes", help="print Slurm's nodes (drained, by whom), as JSON")
    nodes.add_argument("names", nargs="*", metavar="NODE", help="these nodes (default: all)")
    for parser, when in (
        (verify, "when its finding no longer fails"),
        (reboot, "when Slurm takes the reboot"),
        (record, "now"),
    ):
        parser.add_argument(
            "--cause",
            action="append",
            default=[],
            metavar="KEY",
            help=f"a cause repaired, check.finding as plan names it, kept in the history {when} "
            "(repeat for more)",
        )
    for parser in (plan, verify):
        parser.add_argument(
            "run_args",
            nargs=argparse.REMAINDER,
            metavar="-- RUN_ARGS",
            help="run `hostcheck run RUN_ARGS --report json:-` and read its report",
        )
    for parser in (plan, verify, reboot, record):
        parser.add_argument(
            "--state-dir",
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help=f"the health check's state (default: {DEFAULT_STATE_DIR})",
        )
    for parser in (verify, reboot, nodes):
        parser.add_argument(
            "--scontrol", default="scontrol", metavar="PATH", help="scontrol (default: from PATH)"
        )


def run(args: argparse.Namespace) -> int:
    from hostcheck.health import slurm, state

    now = dt.datetime.now(dt.timezone.utc)
    try:
        if args.repair_action == "record":
            if not args.cause:
                raise UsageError("record: give at least one --cause")
            _record(args.state_dir, args.cause, now)
            return EXIT_OK
        shown = {"plan": _plan, "verify": _verify, "reboot": _reboot, "nodes": _nodes}[
            args.repair_action
        ](args, now)
    except (slurm.SlurmError, state.Busy) as exc:
        raise UsageError(str(exc)) from None
    print(json.dumps(shown, indent=2))
    return EXIT_OK


def _record(state_dir: str, causes: list[str], now: dt.datetime) -> None:
    from hostcheck.health import state

    with state.locked(state_dir, wait_s=STATE_LOCK_WAIT_S):
        kept, _ = state.load(state_dir)
        history, counts = state.recorded(kept, "repaired", causes, now)
        state.save(state_dir, kept.get("streaks") or {}, kept.get("last") or {}, history, counts)


def _run_args(args: argparse.Namespace) -> list[str]:
    return args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args


def _hostcheck_run(run_args: list[str]) -> tuple[int, dict]:
    """`hostcheck run RUN_ARGS --report json:-` with this hostcheck: its exit and report."""
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "run", *run_args, "--report", "json:-"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    try:
        report = json.loads(done.stdout)
    except ValueError:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise UsageError(
            f"hostcheck run exited {done.returncode} without a report: "
            f"{lines[-1] if lines else 'no message'}"
        ) from None
    return done.returncode, report


def _read_report(where: str) -> dict:
    try:
        if where == "-":
            return json.load(sys.stdin)
        with open(where, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--report {where}: cannot read it: {exc}") from None


def _plan(args: argparse.Namespace, now: dt.datetime) -> dict:
    from hostcheck.health import repair, state

    if not args.window_days >= 0:
        raise UsageError("--window-days must be 0 or more")
    run_args = _run_args(args)
    run_exit, report = _hostcheck_run(run_args) if run_args else (None, _read_report(args.report))
    where = "hostcheck run's report" if run_args else f"--report {args.report}"
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
        raise UsageError(f"{where}: not a hostcheck report (no checks)")
    kept, _ = state.load(args.state_dir)
    try:
        planned = repair.plan(report, kept.get("history") or [], now, args.window_days)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: not a hostcheck report ({exc!r})") from None
    unassessed = [
        f"{c.get('id')}: {c.get('summary')}" for c in report["checks"] if c.get("status") == "error"
    ]
    return {"run_exit": run_exit, "unassessed": unassessed, **planned.to_dict()}


def _scontrol(args: argparse.Namespace):
    from hostcheck.health import slurm

    return slurm.Scontrol(args.scontrol, lambda: SCONTROL_SECONDS)


def _verify(args: argparse.Namespace, now: dt.datetime) -> dict:
    run_args = _run_args(args)
    if not run_args:
        raise UsageError("verify: give hostcheck run's arguments after --")
    from hostcheck.health import repair

    run_exit, report = _hostcheck_run(run_args)
    passes = run_exit == 0
    # each cause the repair set right, even while another still fails
    still = set(repair.failing_causes(report))
    recorded = [c for c in args.cause if c not in still]
    if recorded:
        _record(args.state_dir, recorded, now)
    node, resumed = None, False
    if args.resume:
        scontrol = _scontrol(args)
        found = scontrol.node(args.resume)
        resumed = passes and found.drained_by_hostcheck
        if resumed:
            scontrol.resume(args.resume)
            found = scontrol.node(args.resume)
        node = found.to_dict()
    return {
        "run_exit": run_exit,
        "passes": passes,
        "recorded": recorded,
        "resumed": resumed,
        "node": node,
        "verdict": report.get("verdict"),
        "after": repair.after(report, args.cause),
    }


def _reboot(args: argparse.Namespace, now: dt.datetime) -> dict:
    scontrol = _scontrol(args)
    node = scontrol.node(args.name)
    why = ""
    if node.drained and not node.drained_by_hostcheck:
        why = f"drained by someone else ({node.reason})"
    elif not scontrol.reboot_program():
        why = "slurm.conf has no RebootProgram, so Slurm cannot do it"
    else:
        scontrol.reboot(args.name, args.reason)
        if args.cause:
            _record(args.state_dir, args.cause, now)
        node = scontrol.node(args.name)
    return {"rebooting": not why, "why": why, "node": node.to_dict()}


def _nodes(args: argparse.Namespace, now: dt.datetime) -> dict:
    scontrol = _scontrol(args)
    nodes = [scontrol.node(n) for n in args.names] if args.names else scontrol.nodes()
    return {"nodes": [n.to_dict() for n in nodes]}
