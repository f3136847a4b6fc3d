"""Run a command with a larger CPU share: `python -m tests.jobs.isolated COMMAND [ARG ...]`
from the checkout.

Start it in a session of its own (start_new_session=True): with the kernel's autogroup
scheduling CPU time is shared between sessions first, so on a shared machine (other test
modules, sandbox fleets) the measured job asks for a larger share of its own session (root
only; tests/support/loop_point.py does the same for the loop). Then it replaces itself with
COMMAND, whose processes (the job, its ranks and their DataLoader workers) stay in that
session. Experimental control for checking arithmetic; hostcheck never changes priorities.
"""

import os
import sys

from tests.support.loop_point import raise_share


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tests.jobs.isolated COMMAND [ARG ...]")
    print(f"CPU share: {raise_share()}", file=sys.stderr, flush=True)
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
