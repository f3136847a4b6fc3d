"""What the commands share: usage errors, the options several take, the profile they load and
where their reports go."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from hostcheck.config import PROFILE_NAMES, Profile, build_schema, load_profile

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Wrong command-line use; printed as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + error
        raise UsageError(f"{message} (see: {self.prog} --help)")


def profile_options(parser: argparse.ArgumentParser) -> None:
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


def report_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help=f"also write {what} (- for stdout; repeatable)",
    )


def fail_on_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--fail-on",
        choices=("fail", "warn"),
        default="fail",
        help=f"lowest {what} that makes the exit code 1 (default: fail)",
    )


def host_options(parser: argparse.ArgumentParser) -> None:
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


def loader_assignments(args: argparse.Namespace) -> list[str]:
    pairs = {
        "workers": args.workers,
        "prefetch_factor": args.prefetch_factor,
        "batch_bytes": args.batch_bytes,
        "ranks": args.ranks,
    }
    return [f"shm.loader.{key}={value}" for key, value in pairs.items() if value is not None]


def profile_schema() -> dict:
    """The schema of a whole profile: each check's section (hostcheck.registry) and the
    sections of the fleet and job commands."""
    from hostcheck.fleet import settings as fleet_settings
    from hostcheck.job import profile as job_profile
    from hostcheck.registry import CHECKS

    return build_schema(
        {check_id: spec.schema for check_id, spec in CHECKS.items()},
        {"fleet": fleet_settings.SCHEMA, "job": job_profile.SCHEMA},
    )


def load(
    args: argparse.Namespace, extra: Sequence[str] = (), schema: dict | None = None
) -> Profile:
    """The profile the options name; against `schema`, or profile_schema()."""
    if schema is None:
        schema = profile_schema()
    return load_profile(args.profile, schema, args.config, [*extra, *args.assignments])


def report_targets(
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
