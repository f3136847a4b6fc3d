"""Where the checkout is, for tests and helpers at any depth under tests/, the bin folder of the
Python running them (ansible-playbook, ansible-lint), and the machine-wide cache.

MACHINE_CACHE holds what the suite builds and can reuse, each entry keyed by what it is built
from (root file systems by recipe, wheels by source tree, ccache by compile, .deb sets by root
file system): every checkout and clean clone on this machine shares it, so a CI run pays for
them once per machine, not once per clone. It is HOSTCHECK_TEST_CACHE when set, else
$XDG_CACHE_HOME/hostcheck-tests (~/.cache/hostcheck-tests). Removing it costs only time: the
next run builds everything again. What belongs to one run (fleets, reports, the cost ledger)
stays in the checkout's .cache/."""

import os
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def machine_cache(environ=os.environ) -> Path:
    if environ.get("HOSTCHECK_TEST_CACHE"):
        return Path(environ["HOSTCHECK_TEST_CACHE"]).resolve()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).resolve() / "hostcheck-tests"


MACHINE_CACHE = machine_cache()
