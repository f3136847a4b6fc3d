"""What `hostcheck run` and `hostcheck healthcheck` say when root starts them from a venv that
someone besides root can change: the hostcheck timer and Slurm's health check run them as root
on a schedule. The roles refuse such a venv before they install anything; this catches a venv
changed since (a chmod, an install by hand as another user). It warns and goes on: by the time
it runs, the interpreter has already imported what it imports, so it can say but not prevent,
and a failing exit would drain the node in Slurm for what is a setup fix."""

from __future__ import annotations

import os
import sys

from hostcheck._shared.root_trust import first_and_count, startup_problems

COMMANDS = frozenset({"run", "healthcheck"})
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def warning(venv: str, package_dir: str = PACKAGE_DIR) -> str | None:
    """The one-line warning for root running hostcheck from this venv, or None when only root
    can change what it runs."""
    program = (
        "bin/hostcheck" if os.path.exists(os.path.join(venv, "bin", "hostcheck")) else "bin/python"
    )
    problems = startup_problems(venv, program, package_dir)
    if not problems:
        return None
    return (
        f"hostcheck: warning: running as root from {venv}, which others can change: "
        f"{first_and_count(problems)}; make it root's alone (chown -R root:root {venv}; "
        f"chmod -R go-w {venv}) or run root's checks from a venv only root can write"
    )


def warn_if_others_can_change(command: str) -> None:
    if command in COMMANDS and os.geteuid() == 0 and sys.prefix != sys.base_prefix:
        said = warning(sys.prefix)
        if said:
            print(said, file=sys.stderr)
