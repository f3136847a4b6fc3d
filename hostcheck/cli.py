"""`hostcheck run | list | explain`: the command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from hostcheck import __version__
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
    run.add_argument("--user", metavar="NAME", help="also check what a fresh login of NAME gets")
    run.add_argument("--dataset-path", metavar="PATH", help="check the storage holding PATH")
    run.add_argument(
        "--require-gpu", action="store_true", help="fail instead of skip when no GPU is usable"
    )
    loader = run.add_argument_group("DataLoader shape (for the /dev/shm it needs)")
    loader.add_argument("--workers", type=int, metavar="N", help="num_workers per rank")
    loader.add_argument("--prefetch-factor", type=int, metavar="N", help="prefetch_factor")
    loader.add_argument("--batch-bytes", metavar="SIZE", help="bytes of one batch, e.g. 150MiB")
    loader.add_argument("--ranks", type=int, metavar="N", help="training processes on the host")
    run.add_argument(
        "--check",
        action="append",
        dest="checks",
        metavar="ID",
        help="run only this check (repeatable)",
    )
    run.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help="also write json:PATH, junit:PATH or prom:PATH (- for stdout; repeatable)",
    )
    run.add_argument(
        "--fail-on",
        choices=("fail", "warn"),
        default="fail",
        help="lowest status that makes the exit code 1 (default: fail)",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="show every finding")

    listing = commands.add_parser("list", help="show the checks and their thresholds")
    _profile_options(listing)

    explain = commands.add_parser("explain", help="what a check measures and why it matters")
    explain.add_argument("check_id", metavar="ID")
    _profile_options(explain)
    return parser


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


def _check_report_targets(specs: Sequence[str]) -> list[tuple[str, str]]:
    from hostcheck.report.writers import ReportSpecError, parse_report_spec

    targets = []
    for spec in specs:
        try:
            kind, path = parse_report_spec(spec)
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


def cmd_run(args: argparse.Namespace) -> int:
    from hostcheck.checks.base import RunOptions
    from hostcheck.model import Status
    from hostcheck.registry import CHECKS
    from hostcheck.report.document import build_document
    from hostcheck.report.table import render_table
    from hostcheck.report.writers import write_report
    from hostcheck.runner import run_checks
    from hostcheck.system import System

    unknown = [c for c in args.checks or () if c not in CHECKS]
    if unknown:
        raise UsageError(f"--check {unknown[0]}: no such check (known: {', '.join(CHECKS)})")
    targets = _check_report_targets(args.report)
    profile = _load(args, _loader_assignments(args))
    options = RunOptions(
        user=args.user, dataset_path=args.dataset_path, require_gpu=args.require_gpu
    )
    to_stdout = any(path == "-" for _, path in targets)
    console = Console(stderr=to_stdout, highlight=False)
    system = System()
    fail_on = Status(args.fail_on)
    if console.is_terminal:
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
    document = build_document(outcome, exit_code, system.read("/etc/os-release"))
    render_table(document, console, verbose=args.verbose)
    for kind, path in targets:
        try:
            write_report(kind, path, document, fail_on_warn=fail_on == Status.WARN)
        except OSError as exc:
            print(f"hostcheck: error: --report {kind}:{path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    return exit_code


def _flatten(values: object, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(values, dict):
        items: list[tuple[str, object]] = []
        for key, value in values.items():
            items += _flatten(value, f"{prefix}{key}.")
        return items
    return [(prefix.rstrip("."), values)]


def cmd_list(args: argparse.Namespace) -> int:
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


COMMANDS = {"run": cmd_run, "list": cmd_list, "explain": cmd_explain}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
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
