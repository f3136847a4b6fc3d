"""`hostcheck run | loop | fleet | healthcheck | job | list | explain`: the command line."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Sequence

from hostcheck import __version__, interrupt
from hostcheck.config import PROFILE_NAMES, ConfigError, Profile, load_profile

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Wrong command-line use; printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + error
        raise UsageError(f"{message} (see: {self.prog} --help)")


def _profile_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("thresholds")
    group.add_argument(
        "--profile",
        default="default",
        metavar="NAME|FILE",
        help=f"built-in profile ({', '.join(PROFILE_NAMES)}) or a profile file; default: default",
    )
    group.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML file whose keys override the profile (repeatable)",
    )
    group.add_argument(
        "--set",
        action="append",
        default=[],
        dest="assignments",
        metavar="KEY=VALUE",
        help="override one key, e.g. --set shm.min_size=32GiB (repeatable)",
    )


def _report_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help=f"also write {what} (- for stdout; repeatable)",
    )


def _fail_on_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--fail-on",
        choices=("fail", "warn"),
        default="fail",
        help=f"lowest {what} that makes the exit code 1 (default: fail)",
    )


def _host_options(parser: argparse.ArgumentParser) -> None:
    """What a run checks beyond thresholds (RunOptions and the DataLoader shape)."""
    parser.add_argument("--user", metavar="NAME", help="also check what a fresh login of NAME gets")
    parser.add_argument("--dataset-path", metavar="PATH", help="check the storage holding PATH")
    parser.add_argument(
        "--require-gpu", action="store_true", help="fail instead of skip when no GPU is usable"
    )
    loader = parser.add_argument_group("DataLoader shape (for the /dev/shm it needs)")
    loader.add_argument("--workers", type=int, metavar="N", help="num_workers per rank")
    loader.add_argument("--prefetch-factor", type=int, metavar="N", help="prefetch_factor")
    loader.add_argument("--batch-bytes", metavar="SIZE", help="bytes of one batch, e.g. 150MiB")
    loader.add_argument("--ranks", type=int, metavar="N", help="training processes on the host")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hostcheck",
        description="Verify that this host can feed its GPUs: settings, drivers, data loading.",
    )
    parser.add_argument("--version", action="version", version=f"hostcheck {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    run = commands.add_parser("run", help="check this host and print a verdict")
    _profile_options(run)
    _host_options(run)
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
        "--schedule",
        metavar="CALENDAR",
        help="the systemd OnCalendar= schedule this run repeats on (the hostcheck timer's): "
        "its interval goes into the report and the Prometheus textfile "
        "(hostcheck_run_interval_seconds) for the staleness alert",
    )
    _report_option(run, "json:PATH, junit:PATH or prom:PATH")
    _fail_on_option(run, "status")
    run.add_argument("-v", "--verbose", action="store_true", help="show every finding")

    _loop_parser(commands)

    _fleet_parser(commands)

    from hostcheck.health import command as health_command

    health_command.add_parser(commands, _profile_options, _host_options)

    from hostcheck.job import command as job_command

    job_command.add_parser(commands, _profile_options, _report_option, _fail_on_option)

    listing = commands.add_parser("list", help="show the checks and their thresholds")
    _profile_options(listing)

    explain = commands.add_parser("explain", help="what a check measures and why it matters")
    explain.add_argument("check_id", metavar="ID")
    _profile_options(explain)
    return parser


def _loop_parser(commands: argparse._SubParsersAction) -> None:
    loop = commands.add_parser(
        "loop",
        help="run the synthetic training loop (or sweep it) and show what it measured",
        description="Run the synthetic DataLoader training loop once with the profile's loop "
        "section and these flags on top, or --sweep num_workers, pin_memory and the "
        "prefetcher and recommend a setting. The verdict is the loop check's.",
    )
    _profile_options(loop)
    shape = loop.add_argument_group("loop shape (defaults: the profile's loop section)")
    shape.add_argument("--device", choices=("auto", "cpu", "cuda"))
    shape.add_argument(
        "--sample",
        choices=("jpeg", "busy", "sleep"),
        help="jpeg: decode, random-resized-crop, flip; busy: calibrated CPU; sleep: a wait",
    )
    shape.add_argument("--sample-cost-us", type=float, metavar="US", help="busy/sleep cost")
    shape.add_argument("--batch-size", type=int, metavar="N")
    shape.add_argument("--workers", type=int, metavar="N", help="num_workers")
    shape.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=None)
    shape.add_argument("--prefetch-factor", type=int, metavar="N")
    shape.add_argument("--persistent-workers", action=argparse.BooleanOptionalAction, default=None)
    shape.add_argument(
        "--prefetcher",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="copy the next batch while the step runs (CUDA side stream, or a thread)",
    )
    shape.add_argument("--step-ms", type=float, metavar="MS", help="compute time per step")
    shape.add_argument("--seconds", type=float, metavar="S", help="measured time per run")
    shape.add_argument("--dataset-path", metavar="PATH", help="read samples from files here")
    shape.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="training processes per host sharing its cores (default: loop.ranks, else one "
        "per NVIDIA GPU, else 1)",
    )
    loop.add_argument("--sweep", action="store_true", help="sweep and recommend a setting")
    loop.add_argument(
        "--max-workers",
        type=int,
        metavar="N",
        help="sweep up to N workers (default: physical cores // ranks, at least 1)",
    )
    loop.add_argument("--plot", metavar="PNG", help="with --sweep: write the sweep as a PNG")
    loop.add_argument(
        "--write",
        metavar="PATH",
        help="with --sweep: write the recommendation as the DataLoader settings file training "
        "code reads (hostcheck.dataloader; usually /etc/hostcheck/dataloader.json)",
    )
    _report_option(loop, "json:PATH, junit:PATH or prom:PATH")
    loop.add_argument("-v", "--verbose", action="store_true", help="show every finding")


FLEET_FORMATS = ("table", "json", "jsonl", "junit", "prom", "html")


def _fleet_parser(commands: argparse._SubParsersAction) -> None:
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
    _profile_options(fleet)
    fleet.add_argument(
        "--format",
        choices=FLEET_FORMATS,
        default="table",
        help="what goes to standard output (default: table)",
    )
    _report_option(fleet, "json, jsonl, junit, prom or html to PATH")
    _fail_on_option(fleet, "host verdict")
    fleet.add_argument(
        "--jobs", type=int, metavar="N", help="processes reading reports (default: CPUs)"
    )


def _loop_assignments(args: argparse.Namespace) -> list[str]:
    pairs = {
        "device": args.device,
        "sample": args.sample,
        "sample_cost_us": args.sample_cost_us,
        "batch_size": args.batch_size,
        "num_workers": args.workers,
        "pin_memory": args.pin_memory,
        "prefetch_factor": args.prefetch_factor,
        "persistent_workers": args.persistent_workers,
        "prefetcher": args.prefetcher,
        "step_time": None if args.step_ms is None else args.step_ms / 1000,
        "seconds": args.seconds,
    }
    shown = {True: "true", False: "false"}
    return [
        f"loop.{key}={shown.get(value, value) if isinstance(value, bool) else value}"
        for key, value in pairs.items()
        if value is not None
    ]


def cmd_loop(args: argparse.Namespace) -> int:

    from rich.console import Console
    from rich.text import Text

    from hostcheck.checks import loop as loop_check
    from hostcheck.checks.base import RunOptions
    from hostcheck.loop import command
    from hostcheck.report.document import build_document
    from hostcheck.report.table import render_table
    from hostcheck.report.writers import write_report
    from hostcheck.system import System

    for option, value in (("--plot", args.plot), ("--write", args.write)):
        if value and not args.sweep:
            raise UsageError(f"{option} needs --sweep")
    if args.plot and not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
        raise UsageError(f"--plot {args.plot}: directory does not exist")
    if args.write:
        problem = command.write_target_problem(args.write)
        if problem:
            raise UsageError(f"--write {args.write}: {problem}")
    if args.max_workers is not None and args.max_workers < 0:
        raise UsageError("--max-workers must be 0 or more")
    if args.ranks is not None and args.ranks < 1:
        raise UsageError("--ranks must be 1 or more")
    if args.dataset_path and not os.path.isdir(args.dataset_path):
        raise UsageError(f"--dataset-path {args.dataset_path}: not a directory")
    targets = _check_report_targets(args.report)
    ranks = [] if args.ranks is None else [f"loop.ranks={args.ranks}"]
    profile = _load(args, [*_loop_assignments(args), *ranks])
    section = profile.section("loop")
    missing = loop_check._missing("torch") or (
        section["sample"] == "jpeg" and loop_check._missing("PIL")
    )
    if missing:
        raise UsageError(f"the loop needs {missing}, which this Python cannot import")
    began = time.time()
    system = System()
    settings, data = loop_check.prepare(system, section, args.dataset_path)
    to_stdout = any(path == "-" for _, path in targets)
    console = Console(stderr=to_stdout, highlight=False)
    from hostcheck.runner import outcome_of

    try:
        if args.sweep:
            budget = max(1, data["physical_cores"] // data["ranks"])
            max_workers = budget if args.max_workers is None else args.max_workers
            check, lines = command.run_sweep(
                settings, section, max_workers, console, data, args.plot
            )
        else:
            check, lines = command.run_once(settings, section, console, data)
    except RuntimeError as exc:  # e.g. --device cuda without a GPU
        raise UsageError(str(exc)) from None
    options = RunOptions(dataset_path=args.dataset_path)
    outcome = outcome_of([check], began, profile, options)
    exit_code = outcome.exit_code()
    document = build_document(outcome, exit_code, system.read("/etc/os-release"))
    render_table(document, console, verbose=args.verbose or not args.sweep)
    for line in lines:
        console.print(Text(line))
    if args.write:
        try:
            line = command.write_settings(args.write, check, settings, system)
            console.print(Text(line), soft_wrap=True)  # a path in one piece
        except OSError as exc:
            print(f"hostcheck: error: --write {args.write}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    for kind, path in targets:
        try:
            write_report(kind, path, document)
        except OSError as exc:
            print(f"hostcheck: error: --report {kind}:{path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    return exit_code


def _loader_assignments(args: argparse.Namespace) -> list[str]:
    pairs = {
        "workers": args.workers,
        "prefetch_factor": args.prefetch_factor,
        "batch_bytes": args.batch_bytes,
        "ranks": args.ranks,
    }
    return [f"shm.loader.{key}={value}" for key, value in pairs.items() if value is not None]


def _load(args: argparse.Namespace, extra: Sequence[str] = ()) -> Profile:
    from hostcheck.registry import profile_schema

    return load_profile(args.profile, profile_schema(), args.config, [*extra, *args.assignments])


def _check_report_targets(
    specs: Sequence[str], formats: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    if not specs:
        return []
    from hostcheck.report.writers import FORMATS, ReportSpecError, parse_report_spec

    targets = []
    for spec in specs:
        try:
            kind, path = parse_report_spec(spec, formats or FORMATS)
        except ReportSpecError as exc:
            raise UsageError(str(exc)) from None
        if path != "-":
            directory = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(directory):
                raise UsageError(f"--report {spec}: directory {directory} does not exist")
            if not os.access(directory, os.W_OK):
                raise UsageError(f"--report {spec}: directory {directory} is not writable")
        targets.append((kind, path))
    if sum(path == "-" for _, path in targets) > 1:
        raise UsageError("--report: only one report can go to standard output (-)")
    return targets


def _schedule(calendar: str) -> dict:
    """The report's schedule section: the calendar and how often it repeats, or why unknown."""
    from hostcheck.schedule import ScheduleError, interval_seconds

    try:
        interval, problem = interval_seconds(calendar)
    except ScheduleError as exc:
        raise UsageError(f"--schedule {calendar}: {exc}") from None
    return {"calendar": calendar, "interval_s": interval, "problem": problem}


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from hostcheck.checks.base import RunOptions
    from hostcheck.model import Status
    from hostcheck.registry import CHECKS
    from hostcheck.report.document import build_document
    from hostcheck.report.table import render_table
    from hostcheck.runner import run_checks
    from hostcheck.system import System

    unknown = [c for c in args.checks or () if c not in CHECKS]
    if unknown:
        raise UsageError(f"--check {unknown[0]}: no such check (known: {', '.join(CHECKS)})")
    targets = _check_report_targets(args.report)
    schedule = _schedule(args.schedule) if args.schedule else None
    profile = _load(args, _loader_assignments(args))
    options = RunOptions(
        user=args.user, dataset_path=args.dataset_path, require_gpu=args.require_gpu
    )
    to_stdout = any(path == "-" for _, path in targets)
    console = Console(stderr=to_stdout, highlight=False)
    system = System()
    fail_on = Status(args.fail_on)
    os_release_text = system.read("/etc/os-release")
    reuse = None
    if args.reuse_measurements:
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


def _fleet_baseline(args: argparse.Namespace) -> tuple[object, str | None, str]:
    """(baseline from a file or None, baseline folder or None, note when there is none)."""
    from hostcheck.fleet.analyze import Baseline
    from hostcheck.fleet.extract import Unusable
    from hostcheck.fleet.load import previous_audit, read_baseline_file

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


def cmd_fleet(args: argparse.Namespace) -> int:
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
    targets = _check_report_targets(args.report, FLEET_FORMATS[1:])
    if args.format != "table":
        if any(path == "-" for _, path in targets):
            raise UsageError(f"--format {args.format} and --report ...:- both want stdout")
        targets.append((args.format, "-"))
    profile = _load(args)
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


def _flatten(values: object, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(values, dict):
        items: list[tuple[str, object]] = []
        for key, value in values.items():
            items += _flatten(value, f"{prefix}{key}.")
        return items
    return [(prefix.rstrip("."), values)]


def cmd_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hostcheck.registry import CHECKS

    profile = _load(args)
    table = Table(title=f"checks and thresholds (profile {profile.name})", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("enabled", no_wrap=True)
    table.add_column("what it checks")
    table.add_column("thresholds")
    for check_id, spec in CHECKS.items():
        section = dict(profile.section(check_id))
        enabled = section.pop("enabled", True)
        thresholds = "\n".join(f"{k} = {_show(v)}" for k, v in _flatten(section))
        table.add_row(check_id, "yes" if enabled else "no", escape(spec.title), escape(thresholds))
    Console(highlight=False).print(table)
    return EXIT_OK


def _show(value: object) -> str:
    """A threshold as it would be written in a profile."""
    import json

    return value if isinstance(value, str) else json.dumps(value)


def cmd_explain(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from hostcheck.registry import CHECKS

    spec = CHECKS.get(args.check_id)
    if spec is None:
        raise UsageError(f"explain {args.check_id}: no such check (known: {', '.join(CHECKS)})")
    profile = _load(args)
    out = Console(highlight=False)
    out.print(f"[bold]{spec.id}[/bold]: {escape(spec.title)}\n")
    out.print(escape(spec.explain) + "\n")
    out.print(f"Thresholds in profile {escape(profile.name)}:")
    for key, value in _flatten(profile.section(spec.id)):
        out.print(escape(f"  {spec.id}.{key} = {_show(value)}"))
    if spec.roles:
        out.print(f"\nFixed by the role(s): {', '.join(spec.roles)} (see README)")
    return EXIT_OK


def cmd_healthcheck(args: argparse.Namespace) -> int:
    from hostcheck.health import command as health_command

    return health_command.run(args, _load(args, _loader_assignments(args)), UsageError)


def cmd_job(args: argparse.Namespace) -> int:
    from hostcheck.job import command as job_command

    return job_command.run(args, _load, _check_report_targets, UsageError)


COMMANDS = {
    "run": cmd_run,
    "job": cmd_job,
    "loop": cmd_loop,
    "fleet": cmd_fleet,
    "healthcheck": cmd_healthcheck,
    "list": cmd_list,
    "explain": cmd_explain,
}


def main(argv: Sequence[str] | None = None) -> int:
    interrupt.install()
    try:
        args = build_parser().parse_args(argv)
        code = COMMANDS[args.command](args)
        interrupt.raise_if_received()
        return code
    except (UsageError, ConfigError) as exc:
        print(f"hostcheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("hostcheck: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if os.environ.get("HOSTCHECK_DEBUG"):
            raise
        print(
            f"hostcheck: internal error: {type(exc).__name__}: {exc} "
            "(set HOSTCHECK_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
