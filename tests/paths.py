"""Where the checkout is, for tests and helpers at any depth under tests/, and the bin folder of
the Python running them (ansible-playbook, ansible-lint)."""

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
