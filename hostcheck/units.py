"""Sizes and limits as people write them: 64MiB, 1.5G, 50%, unlimited. What a size, a percentage
of RAM and a tmpfs size mean, and how a size is shown, is plugins/module_utils/sizes.py's
(hostcheck._shared.sizes), shared with the roles."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hostcheck._shared.sizes import (
    format_size,
    parse_size,
    ram_percent,
    tmpfs_percent_bytes,
    tmpfs_size_bytes,
)

UNLIMITED = math.inf


@dataclass(frozen=True)
class SizeSpec:
    """A size given as bytes or as a percentage of a reference (RAM for /dev/shm)."""

    bytes: int | None = None
    percent: float | None = None

    def tmpfs_bytes(self, memtotal: int) -> int:
        """The size of a tmpfs mounted with this size on memtotal bytes of RAM: whole pages,
        rounded up as the kernel does."""
        if self.percent is not None:
            return tmpfs_percent_bytes(self.percent, memtotal)
        return tmpfs_size_bytes(str(self.bytes), memtotal)

    def __str__(self) -> str:
        if self.percent is not None:
            return f"{self.percent:g}% of RAM"
        return format_size(self.bytes or 0)


def parse_size_spec(value: object) -> SizeSpec:
    """A threshold for a tmpfs: a size, or a percentage of RAM that may have a fraction."""
    percent = ram_percent(value, whole=False)
    if percent is not None:
        return SizeSpec(percent=float(percent))
    return SizeSpec(bytes=parse_size(value))


def format_rate(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e6:.0f} MB/s"


def format_ratio(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


# A finding's unit (Finding.unit) and how its number is shown. Prometheus carries the unit
# (hostcheck_finding_value{unit}), so `hostcheck fleet --prometheus` shows 64.0 MiB as a report
# does, not 67108864.
FINDING_UNITS = {"bytes": format_size, "ratio": format_ratio, "bytes_per_second": format_rate}


def format_in(value: object, unit: str) -> str:
    """A finding's measured value as people read it: in its unit when it has one."""
    shown = FINDING_UNITS.get(unit)
    if shown is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if math.isnan(value) or (math.isinf(value) and unit != "bytes"):
        return str(value)
    return shown(value)


def parse_limit(value: object) -> float:
    """A resource limit: a non-negative integer or unlimited/infinity/-1 (as RLIM_INFINITY)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a limit, got {value!r}")
    if isinstance(value, int):
        if value == -1:
            return UNLIMITED
        if value < 0:
            raise ValueError(f"limit must not be negative: {value}")
        return value
    if isinstance(value, float) and value == UNLIMITED:
        return UNLIMITED
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("unlimited", "infinity", "inf", "-1"):
            return UNLIMITED
        if text.isdigit():
            return int(text)
    raise ValueError(f"not a limit: {value!r} (an integer or 'unlimited')")


def parse_size_or_unlimited(value: object) -> float:
    """A byte amount that may also be unlimited: memlock thresholds (64MiB, unlimited)."""
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "infinity", "inf"):
        return UNLIMITED
    if value == -1 and not isinstance(value, bool):
        return UNLIMITED
    try:
        return parse_size(value)
    except ValueError:
        message = f"not a size or 'unlimited': {value!r} (examples: 64MiB, unlimited)"
        raise ValueError(message) from None


def format_limit(value: float) -> str:
    return "unlimited" if value == UNLIMITED else str(int(value))
