"""`hostcheck fleet`: one verdict for many hosts, from an audit folder or from Prometheus."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

from hostcheck.commands.common import (
    EXIT_USAGE,
    UsageError,
    fail_on_option,
    load,
    profile_options,
    report_option,
    report_targets,
)

FLEET_FORMATS = ("table", "json", "jsonl", "junit", "prom", "html")


def add_parser(commands: argparse._SubParsersAction) -> None:
    fleet = commands.add_parser(
        "fleet",
        help="one verdict for an audit folder of reports: failures, outliers, drift",
        description="Read every <host>.json in DIR (hostcheck reports and the audit's "
        "markers for hosts it could not reach), and show each host's verdict, hosts per "
        "check and status, outliers among hosts with the same hardware, and what changed "
        "since the baseline (the previous audit folder next to DIR, by default). Exit 1 "
        "when a host failed, broke, could not be reached or its report could not be read.",
    )
    fleet.add_argument(
        "directory", metavar="DIR", nargs="?", help="audit folder of <host>.json files"
    )
    fleet.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the hosts from this Prometheus (http://HOST:9090) instead of DIR: the "
        "hostcheck timer's textfile series as node_exporter serves them",
    )
    fleet.add_argument(
        "--at",
        metavar="TIME",
        help="with --prometheus: the instant to read (RFC 3339, Unix seconds or a duration "
        "ago such as 1h; default: now)",
    )
    fleet.add_argument(
        "--baseline-at",
        metavar="TIME",
        help="with --prometheus: compare with the hosts at this earlier instant (as --at; a "
        "duration counts back from --at)",
    )
    fleet.add_argument(
        "--selector",
        metavar="MATCHERS",
        default="",
        help='with --prometheus: label matchers that narrow every query, e.g. job="node"',
    )
    fleet.add_argument(
        "--host-label",
        metavar="LABEL",
        default="instance",
        help="with --prometheus: the label that names a host (default: instance; hostname "
        "takes the name the host gives itself)",
    )
    fleet.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with --prometheus: how long to wait for each answer (default: 30)",
    )
    baseline = fleet.add_mutually_exclusive_group()
    baseline.add_argument(
        "--baseline",
        metavar="DIR|FILE",
        help="compare with this audit folder, saved fleet JSON or report "
        "(default: the latest earlier timestamp-named folder next to DIR)",
    )
    baseline.add_argument("--no-baseline", action="store_true", help="no drift section")
    profile_options(fleet)
    fleet.add_argument(
        "--format",
        choices=FLEET_FORMATS,
        default="table",
        help="what goes to standard output (default: table)",
    )
    report_option(fleet, "json, jsonl, junit, prom or html to PATH")
    fail_on_option(fleet, "host verdict")
    fleet.add_argument(
        "--jobs", type=int, metavar="N", help="processes reading reports (default: CPUs)"
    )


def _fleet_baseline(args: argparse.Namespace) -> tuple[object, str | None, str]:
    """(baseline from a file or None, baseline folder or None, note when there is none)."""
    from hostcheck.fleet.analyze import Baseline
    from hostcheck.fleet.load import previous_audit, read_baseline_file
    from hostcheck.report.extract import Unusable

    if args.no_baseline:
        return None, None, "not compared (--no-baseline)"
    if args.baseline is None:
        folder = previous_audit(args.directory)
        note = "" if folder else "no earlier audit folder next to this one"
        return None, folder, note
    if os.path.isdir(args.baseline):
        return None, args.baseline, ""
    if not os.path.exists(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file or folder")
    try:
        kind, entries = read_baseline_file(args.baseline)
    except Unusable as exc:
        raise UsageError(f"--baseline {args.baseline}: {exc}") from None
    return Baseline(args.baseline, kind, entries), None, ""


def run(args: argparse.Namespace) -> int:
    from hostcheck.fleet.analyze import Baseline, analyze
    from hostcheck.fleet.load import default_jobs, read_folders, saved_summary
    from hostcheck.fleet.settings import FleetSettings

    if args.prometheus:
        if args.directory or args.baseline:
            raise UsageError("--prometheus reads the hosts: no DIR or --baseline with it")
    else:
        if not args.directory:
            raise UsageError("give an audit folder DIR or --prometheus URL")
        for option in ("at", "baseline_at", "selector"):
            if getattr(args, option):
                raise UsageError(f"--{option.replace('_', '-')} needs --prometheus")
        if not os.path.isdir(args.directory):
            raise UsageError(f"{args.directory}: not a directory")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be 1 or more")
    targets = report_targets(args.report, FLEET_FORMATS[1:])
    if args.format != "table":
        if any(path == "-" for _, path in targets):
            raise UsageError(f"--format {args.format} and --report ...:- both want stdout")
        targets.append((args.format, "-"))
    profile = load(args)
    settings = FleetSettings.from_profile(profile.values)
    if args.prometheus:
        source, entries, baseline, note = _fleet_from_prometheus(args)
        report = analyze(
            source,
            entries,
            settings,
            baseline,
            profile_name=profile.name,
            profile_sources=profile.sources,
            fail_on=args.fail_on,
            baseline_note=note,
        )
        return _show_fleet(report, args, targets)
    baseline, baseline_folder, note = _fleet_baseline(args)
    if baseline_folder and (summary := saved_summary(baseline_folder)) is not None:
        baseline, baseline_folder = Baseline(baseline_folder, "fleet", summary), None
    folders = [args.directory] + ([baseline_folder] if baseline_folder else [])
    try:
        read = read_folders(folders, args.jobs or default_jobs())
    except OSError as exc:
        raise UsageError(f"{exc.filename}: cannot list: {exc.strerror}") from None
    current = read[0]
    if not current.entries:
        raise UsageError(f"{args.directory}: no reports (<host>.json) in it")
    if baseline_folder:
        baseline = Baseline(baseline_folder, "folder", read[1].entries)
    report = analyze(
        args.directory,
        current.entries,
        settings,
        baseline,
        profile_name=profile.name,
        profile_sources=profile.sources,
        fail_on=args.fail_on,
        ignored=current.ignored,
        baseline_note=note,
    )
    return _show_fleet(report, args, targets)


def _fleet_from_prometheus(args: argparse.Namespace) -> tuple[str, list, object, str]:
    """(what the hosts were read from, the hosts, the baseline or None, note without one)."""
    from hostcheck.fleet.analyze import Baseline
    from hostcheck.fleet.prometheus import PrometheusError, Source, parse_time, read_entries

    if not args.prometheus.startswith(("http://", "https://")):
        raise UsageError(f"--prometheus {args.prometheus}: not an http:// or https:// URL")
    if not 0 < args.timeout <= 3600:
        raise UsageError("--timeout must be more than 0 and at most 3600 seconds")
    now = time.time()
    try:
        at = parse_time(args.at, now) if args.at else now
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from None
    try:
        before = parse_time(args.baseline_at, at) if args.baseline_at else None
    except ValueError as exc:
        raise UsageError(f"--baseline-at: {exc}") from None
    if before is not None and before >= at:
        raise UsageError("--baseline-at must be earlier than --at")
    source = Source(args.prometheus, args.timeout, args.selector)
    try:
        entries = read_entries(source, at, args.host_label)
        baseline = None
        if before is not None:
            baseline = Baseline(
                f"{args.prometheus} at {_utc(before)}",
                "prometheus",
                read_entries(source, before, args.host_label),
            )
    except PrometheusError as exc:
        raise UsageError(str(exc)) from None
    note = "" if baseline else "not compared (no --baseline-at)"
    return f"{args.prometheus} at {_utc(at)}", entries, baseline, note


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _show_fleet(report, args: argparse.Namespace, targets: list) -> int:
    from rich.console import Console

    from hostcheck.fleet.render import RENDERERS
    from hostcheck.fleet.render_table import render_table
    from hostcheck.report.writers import write_report_text

    if args.format == "table":
        to_stdout = any(path == "-" for _, path in targets)
        render_table(report, Console(stderr=to_stdout, highlight=False))
    for kind, path in targets:
        try:
            write_report_text(path, RENDERERS[kind](report))
        except OSError as exc:
            print(f"hostcheck: error: --report {kind}:{path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    return report.exit_code
