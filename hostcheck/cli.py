"""`hostcheck run | loop | fleet | healthcheck | repair | job | list | explain`: the command
line. Each command is a module of hostcheck/commands, imported for its parser; what a command
needs beyond that it imports when it runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hostcheck import __version__, interrupt, root_runs
from hostcheck.commands import catalog, fleet, healthcheck, job, loop, repair, run
from hostcheck.commands.common import EXIT_USAGE, Parser, UsageError
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
    healthcheck.add_parser(commands)
    repair.add_parser(commands)
    job.add_parser(commands)
    catalog.add_parsers(commands)
    return parser


COMMANDS = {
    "run": run.run,
    "job": job.run,
    "loop": loop.run,
    "fleet": fleet.run,
    "healthcheck": healthcheck.run,
    "repair": repair.run,
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
