"""`hostcheck run ... --host-state` on a tree standing in for a host's root: the real
command-line parsing and rules, reading the tree through hostcheck's System."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

from hostcheck.cli import build_parser
from hostcheck.commands.run import host_state_of
from hostcheck.system import System


def host_state(argv: list[str], root: Path, env: dict | None = None) -> dict[str, str]:
    """The parts for `hostcheck ARGV` (argv without the program), read under root."""
    args = build_parser().parse_args(argv)
    return host_state_of(args, argv, System(root=root, env=env or {}))


def site_packages(root: Path) -> Path:
    """Where the tree holds the distributions installed beside hostcheck."""
    return root / sysconfig.get_paths()["purelib"].lstrip("/")


def command_on(root: Path, env: dict | None = None):
    """A stand-in for the probe's run_command that answers `hostcheck ... --host-state` as
    hostcheck would on the tree (and fails, as hostcheck does, on a command it refuses)."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        assert argv[-1] == "--host-state", argv
        try:
            parts = host_state(argv[1:], root, env)
        except SystemExit as exc:
            return int(exc.code or 2), "", "hostcheck: error: usage"
        except Exception as exc:  # what hostcheck prints as an error
            return 2, "", f"hostcheck: error: {exc}"
        return 0, json.dumps(parts), ""

    return run
