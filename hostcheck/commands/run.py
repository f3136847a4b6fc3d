"""`hostcheck run`: check this host and print a verdict."""

from __future__ import annotations

import argparse
import sys

from hostcheck.commands.common import (
    EXIT_USAGE,
    UsageError,
    fail_on_option,
    host_options,
    load,
    loader_assignments,
    profile_options,
    report_option,
    report_targets,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="check this host and print a verdict")
    profile_options(run)
    host_options(run)
    run.add_argument(
        "--check",
        action="append",
        dest="checks",
        metavar="ID",
        help="run only this check (repeatable)",
    )
    run.add_argument(
        "--reuse-measurements",
        metavar="REPORT",
        help="keep the loop, benchmark and read-test results of this earlier JSON report "
        "when nothing they depend on changed since (else measure, as without it)",
    )
    run.add_argument(
        "--record-basis",
        action="store_true",
        help="measure anew, and record in the JSON report what the measurements depend on, as "
        "--reuse-measurements does: a later run with --reuse-measurements, or the health "
        "check, can then take them",
    )
    run.add_argument(
        "--schedule",
        metavar="CALENDAR",
        help="the systemd OnCalendar= schedule this run repeats on (the hostcheck timer's): "
        "its interval goes into the report and the Prometheus textfile "
        "(hostcheck_run_interval_seconds) for the staleness alert",
    )
    run.add_argument(
        "--host-state",
        action="store_true",
        help="run no check: print, as JSON, a digest of each part of what this run depends "
        "on (command line, profile, hostcheck's installation, the host files and values its "
        "checks read); a report stands while every part is unchanged",
    )
    report_option(run, "json:PATH, junit:PATH or prom:PATH")
    fail_on_option(run, "status")
    run.add_argument("-v", "--verbose", action="store_true", help="show every finding")


def _schedule(calendar: str) -> dict:
    """The report's schedule section: the calendar and how often it repeats, or why unknown."""
    from hostcheck.schedule import ScheduleError, interval_seconds

    try:
        interval, problem = interval_seconds(calendar)
    except ScheduleError as exc:
        raise UsageError(f"--schedule {calendar}: {exc}") from None
    return {"calendar": calendar, "interval_s": interval, "problem": problem}


def run_options(args: argparse.Namespace):
    from hostcheck.checks.base import RunOptions

    return RunOptions(user=args.user, dataset_path=args.dataset_path, require_gpu=args.require_gpu)


def host_state_of(
    args: argparse.Namespace, argv: list[str], system, schema: dict
) -> dict[str, str]:
    """What `hostcheck run ARGV` depends on (--host-state), one digest per part; schema is the
    compiled one (hostcheck.compiled.digest.SCHEMA)."""
    from hostcheck.state import host_state

    profile = load(args, loader_assignments(args), schema)
    command_line = [arg for arg in argv if arg != "--host-state"]
    return host_state(profile, run_options(args), command_line, system)


def _refuse_unknown_checks(args: argparse.Namespace, known) -> None:
    unknown = [c for c in args.checks or () if c not in known]
    if unknown:
        raise UsageError(f"--check {unknown[0]}: no such check (known: {', '.join(known)})")


def _print_host_state(args: argparse.Namespace) -> int:
    import json

    from hostcheck.compiled.digest import SCHEMA
    from hostcheck.system import System

    _refuse_unknown_checks(args, SCHEMA["properties"]["checks"]["properties"])
    state = host_state_of(args, sys.argv[1:], System(), SCHEMA)
    print(json.dumps(state, indent=1, sort_keys=True))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.host_state:
        return _print_host_state(args)
    from hostcheck.model import Status
    from hostcheck.registry import CHECKS
    from hostcheck.report.document import build_document
    from hostcheck.report.table import render_table
    from hostcheck.runner import run_checks
    from hostcheck.system import System

    _refuse_unknown_checks(args, CHECKS)
    system = System()
    targets = report_targets(args.report)
    schedule = _schedule(args.schedule) if args.schedule else None
    profile = load(args, loader_assignments(args))
    options = run_options(args)
    from rich.console import Console
    from rich.text import Text

    to_stdout = any(path == "-" for _, path in targets)
    console = Console(stderr=to_stdout, highlight=False)
    fail_on = Status(args.fail_on)
    os_release_text = system.read("/etc/os-release")
    reuse = None
    if args.reuse_measurements or args.record_basis:
        from hostcheck.reuse import run_reusing

        outcome, reuse = run_reusing(
            profile, options, system, args.reuse_measurements, os_release_text, args.checks
        )
    elif console.is_terminal:
        with console.status("checking") as status:
            outcome = run_checks(
                profile,
                options,
                system,
                only=args.checks,
                on_start=lambda spec: status.update(f"checking {spec.id}: {spec.title}"),
            )
    else:
        outcome = run_checks(profile, options, system, only=args.checks)
    exit_code = outcome.exit_code(fail_on)
    document = build_document(outcome, exit_code, os_release_text)
    render_table(document, console, verbose=args.verbose)
    if schedule is not None:
        document["schedule"] = schedule
    if reuse is not None:
        document["measurement_basis"] = reuse.basis
        for line in reuse.lines():
            console.print(Text(line))
    if targets:
        from hostcheck.report.writers import write_report
    for kind, path in targets:
        try:
            write_report(kind, path, document, fail_on_warn=fail_on == Status.WARN)
        except OSError as exc:
            print(f"hostcheck: error: --report {kind}:{path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    return exit_code
