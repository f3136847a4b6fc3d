"""Sizes and limits as people write them: 64MiB, 1.5G, 50%, unlimited. The meaning of each unit
is plugins/module_utils/sizes.py's (hostcheck._shared.sizes), shared with the roles."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hostcheck._shared.sizes import parse_size, tmpfs_percent_bytes, tmpfs_size_bytes

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")

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
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if match:
            percent = float(match.group(1))
            if not 0 < percent <= 100:
                raise ValueError(f"percentage must be in (0, 100]: {value!r}")
            return SizeSpec(percent=percent)
    return SizeSpec(bytes=parse_size(value))


def format_size(num: float) -> str:
    """Binary units, three significant digits: 64.0 MiB, 11.8 GiB."""
    if num == UNLIMITED:
        return "unlimited"
    sign = "-" if num < 0 else ""
    num = abs(num)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if num < 1024 or unit == "TiB":
            return f"{sign}{num:.0f} {unit}" if unit == "B" else f"{sign}{num:.1f} {unit}"
        num /= 1024
    raise AssertionError("unreachable")


def format_rate(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e6:.0f} MB/s"


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
