"""How often a systemd calendar schedule (OnCalendar=) repeats, as systemd itself computes it:
the gap between its next two elapses (`systemd-analyze calendar --iterations=2`)."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess

_ELAPSE = re.compile(r"^\s*(?:Next elapse|Iter\. #2): \S+ (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


class ScheduleError(ValueError):
    """systemd rejects the schedule."""


def interval_seconds(calendar: str) -> tuple[float | None, str]:
    """(seconds between the next two runs, '') or (None, why it is unknown). A schedule that
    systemd-analyze rejects raises ScheduleError."""
    program = shutil.which("systemd-analyze")
    if program is None:
        return None, "systemd-analyze is not installed"
    try:
        done = subprocess.run(
            [program, "calendar", "--iterations=2", calendar],
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "TZ": "UTC", "LC_ALL": "C"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"systemd-analyze calendar: {exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise ScheduleError(lines[-1] if lines else f"systemd-analyze exited {done.returncode}")
    times = [m.group(1) for line in done.stdout.splitlines() if (m := _ELAPSE.match(line))]
    if len(times) != 2:
        return None, f"the schedule {calendar!r} does not repeat"
    first, second = (dt.datetime.fromisoformat(t) for t in times)
    return (second - first).total_seconds(), ""
