"""`hostcheck repair plan|record|nodes`: the host's side of playbooks/repair.yml. plan prints what
a repair may do about a report's failing checks (hostcheck.health.repair) as JSON; record keeps
a repair in the health check's history, under its lock; nodes prints Slurm's nodes as the
repair reads them (drained, by whom) and slurm.conf's RebootProgram."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from hostcheck.health.command import DEFAULT_STATE_DIR

DEFAULT_REPORT = "/var/lib/hostcheck/report.json"
DEFAULT_WINDOW_DAYS = 7.0  # the same cause back within a week is not something a role fixes


def add_parser(commands: argparse._SubParsersAction) -> None:
    repair = commands.add_parser(
        "repair",
        help="what a repair may do about a report's failures; keep a repair in the history",
        description="plan: from a report (hostcheck run's JSON), each failing finding's fix: "
        "the roles whose variables its remedy names, a reboot where a GPU reset or a reboot "
        "clears it, else a person; a cause repaired before within --window-days goes to a "
        "person. Prints JSON. record: keep a repair of these causes in the health check's "
        "history (state.json). nodes: Slurm's nodes (state, reason, drained by hostcheck) and "
        "RebootProgram, as JSON. Exit 0, 2 on bad usage, an unreadable file or scontrol failing.",
    )
    actions = repair.add_subparsers(dest="repair_action", metavar="ACTION", required=True)
    plan = actions.add_parser("plan", help="print what a repair may do, as JSON")
    plan.add_argument(
        "--report",
        default=DEFAULT_REPORT,
        metavar="FILE",
        help=f"the host's report, as hostcheck run --report json: writes it; - reads it from "
        f"standard input (default: {DEFAULT_REPORT})",
    )
    plan.add_argument(
        "--window-days",
        type=float,
        default=DEFAULT_WINDOW_DAYS,
        metavar="DAYS",
        help="a cause repaired within this many days is left to a person (default: "
        f"{DEFAULT_WINDOW_DAYS:g})",
    )
    record = actions.add_parser("record", help="keep a repair in the health check's history")
    record.add_argument(
        "--cause",
        action="append",
        required=True,
        metavar="KEY",
        help="a cause repaired, check.finding as plan names it (repeat for more)",
    )
    nodes = actions.add_parser(
        "nodes", help="print Slurm's nodes (drained, by whom) and RebootProgram, as JSON"
    )
    nodes.add_argument("names", nargs="*", metavar="NODE", help="these nodes (default: all)")
    nodes.add_argument(
        "--scontrol", default="scontrol", metavar="PATH", help="scontrol (default: from PATH)"
    )
    for parser in (plan, record):
        parser.add_argument(
            "--state-dir",
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help=f"the health check's state (default: {DEFAULT_STATE_DIR})",
        )


def run(args: argparse.Namespace) -> int:
    from hostcheck.commands.common import EXIT_OK, UsageError
    from hostcheck.health import repair, state

    now = dt.datetime.now(dt.timezone.utc)
    if args.repair_action == "nodes":
        return _print_nodes(args.scontrol, args.names)
    if args.repair_action == "record":
        with state.locked(args.state_dir):
            kept, _ = state.load(args.state_dir)
            history, counts = state.recorded(kept, "repaired", args.cause, now)
            state.save(
                args.state_dir, kept.get("streaks") or {}, kept.get("last") or {}, history, counts
            )
        return EXIT_OK
    if not args.window_days >= 0:
        raise UsageError("--window-days must be 0 or more")
    try:
        if args.report == "-":
            report = json.load(sys.stdin)
        else:
            with open(args.report, encoding="utf-8") as handle:
                report = json.load(handle)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--report {args.report}: cannot read it: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
        raise UsageError(f"--report {args.report}: not a hostcheck report (no checks)")
    kept, _ = state.load(args.state_dir)
    try:
        planned = repair.plan(report, kept.get("history") or [], now, args.window_days)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"--report {args.report}: not a hostcheck report ({exc!r})") from None
    print(json.dumps(planned.to_dict(), indent=2))
    return EXIT_OK


SCONTROL_SECONDS = 30.0  # for each scontrol call


def _print_nodes(program: str, names: list[str]) -> int:
    from hostcheck.commands.common import EXIT_OK, UsageError
    from hostcheck.health import slurm

    scontrol = slurm.Scontrol(program, lambda: SCONTROL_SECONDS)
    try:
        nodes = [scontrol.node(n) for n in names] if names else scontrol.nodes()
        reboot_program = scontrol.reboot_program()
    except slurm.SlurmError as exc:
        raise UsageError(str(exc)) from None
    shown = [
        {
            "name": n.name,
            "state": n.state,
            "reason": n.reason,
            "drained": n.drained,
            "drained_by_hostcheck": n.drained_by_hostcheck,
        }
        for n in nodes
    ]
    print(json.dumps({"reboot_program": reboot_program, "nodes": shown}, indent=2))
    return EXIT_OK
