"""How much of a stretch of time other tasks kept waiting for a CPU, from the kernel's pressure
stall information (/proc/pressure/cpu): for tests that measure a job against arithmetic on a
shared machine, to tell a job that missed from a machine that was busy."""

from __future__ import annotations

import re
import time
from pathlib import Path

# Share of a run's time some task waited for a CPU above which the run timed other load: alone
# here, a measured job reads 0.03 to 0.04.
SPOILED_PRESSURE = 0.5


def cpu_pressure() -> tuple[float, float] | None:
    """(now, microseconds some task waited for a CPU), or None where the kernel has none."""
    try:
        text = Path("/proc/pressure/cpu").read_text()
    except OSError:
        return None
    total = re.search(r"^some .*total=([0-9]+)", text, re.M)
    return (time.monotonic(), float(total[1])) if total else None


def pressure_since(start: tuple[float, float] | None) -> float | None:
    """The share of the time since `start` that some task waited for a CPU."""
    end = cpu_pressure()
    if start is None or end is None or end[0] <= start[0]:
        return None
    return (end[1] - start[1]) / 1e6 / (end[0] - start[0])
