"""`hostcheck run | loop | fleet | healthcheck | repair | job | list | explain`: the command
line. Each command is a module of hostcheck/commands (healthcheck, repair and job: of their
packages), imported for its parser; what a command needs beyond that it imports when it runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hostcheck import __version__, interrupt, root_runs
from hostcheck.commands import catalog, fleet, loop, run
from hostcheck.commands.common import (
    EXIT_USAGE,
    Parser,
    UsageError,
    fail_on_option,
    host_options,
    load,
    loader_assignments,
    profile_options,
    report_option,
    report_targets,
)
from hostcheck.config import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hostcheck",
        description="Verify that this host can feed its GPUs: settings, drivers, data loading.",
    )
    parser.add_argument("--version", action="version", version=f"hostcheck {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    run.add_parser(commands)
    loop.add_parser(commands)
    fleet.add_parser(commands)

    from hostcheck.health import command as health_command

    health_command.add_parser(commands, profile_options, host_options)
    from hostcheck.health import repair_command

    repair_command.add_parser(commands)

    from hostcheck.job import command as job_command

    job_command.add_parser(commands, profile_options, report_option, fail_on_option)
    catalog.add_parsers(commands)
    return parser


def run_healthcheck(args: argparse.Namespace) -> int:
    from hostcheck.health import command as health_command

    return health_command.run(args, load(args, loader_assignments(args)), UsageError)


def run_repair(args: argparse.Namespace) -> int:
    from hostcheck.health import repair_command

    return repair_command.run(args)


def run_job(args: argparse.Namespace) -> int:
    from hostcheck.job import command as job_command

    return job_command.run(args, load, report_targets, UsageError)


COMMANDS = {
    "run": run.run,
    "job": run_job,
    "loop": loop.run,
    "fleet": fleet.run,
    "healthcheck": run_healthcheck,
    "repair": run_repair,
    "list": catalog.run_list,
    "explain": catalog.run_explain,
}


def main(argv: Sequence[str] | None = None) -> int:
    interrupt.install()
    try:
        args = build_parser().parse_args(argv)
        root_runs.warn_if_others_can_change(args.command)
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
