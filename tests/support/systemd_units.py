"""Checking the systemd units roles render, with systemd's own verifier where it is installed."""

from __future__ import annotations

import subprocess
from pathlib import Path


def verify_unit(unit: Path, allowed: tuple[str, ...] = ()) -> list[str]:
    """The complaints of `systemd-analyze verify` about a unit file that mention none of
    `allowed` (e.g. a command this machine does not have)."""
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    return [
        line
        for line in done.stderr.splitlines()
        if line.strip() and not any(word in line for word in allowed)
    ]
