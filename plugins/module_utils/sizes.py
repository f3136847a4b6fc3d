"""Sizes as people write them, with one meaning wherever a size is read (hostcheck's profiles
and options, shm_size, ulimits memlock, dataset_staging_raid_chunk): KB, MB, GB, TB, PB are
decimal (10**3 ...), KiB, MiB, GiB, TiB, PiB binary (2**10 ...), and a single letter K, M, G,
T, P binary, as tmpfs, fstab, Docker's --shm-size and limits.conf read it. A plain number is
bytes. This file is shared: the collection ships it as module_utils and the hostcheck package
as hostcheck._shared (pyproject.toml), so it uses the standard library only and runs on
Python 3.6."""

import math
import re
from fractions import Fraction

UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
    "p": 1024**5,
    "pb": 1000**5,
    "pib": 1024**5,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")
EXAMPLES = "examples: 4096, 64MiB, 1.5G, 10GB"


def parse_size(value):
    """Bytes (an int) from an int or a string such as '64MiB', '1.5G', '10GB', '4096';
    ValueError naming the problem otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must not be negative: {value}")
        return value
    if isinstance(value, float):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"expected a size, got {value!r}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a size, got {value!r}")
    match = _SIZE.match(value)
    if not match:
        raise ValueError(f"not a size: {value!r} ({EXAMPLES})")
    unit = match.group(2).lower()
    if unit not in UNITS:
        raise ValueError(f"not a size: unknown unit {match.group(2)!r} in {value!r} ({EXAMPLES})")
    return int(Fraction(match.group(1)) * UNITS[unit])


def format_size(number):
    """A byte count for people: binary units, one decimal (64.0 MiB, 11.8 GiB), whole bytes
    below 1 KiB (512 B), 'unlimited' for math.inf. The one way every report, message and
    summary shows a size."""
    if number == math.inf:
        return "unlimited"
    sign = "-" if number < 0 else ""
    number = abs(number)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if number < 1024 or unit == "TiB":
            return f"{sign}{number:.0f} {unit}" if unit == "B" else f"{sign}{number:.1f} {unit}"
        number /= 1024
    raise AssertionError("unreachable")


# tmpfs (mm/shmem.c): size=N% is N percent of the RAM pages, and any size is whole pages,
# rounded up.
PAGE = 4096
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def ram_percent(value, whole):
    """The percentage of RAM a text such as '50%' gives (a Fraction), None when value is no
    percentage; ValueError naming the problem for a bad one. tmpfs's size= takes a whole
    percentage (whole=True); a threshold compared with a mounted tmpfs (hostcheck's
    shm.min_size) may have a fraction, 12.5%."""
    if not isinstance(value, str) or "%" not in value:
        return None
    match = _PERCENT.match(value)
    if not match or (whole and "." in match.group(1)):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"a percentage of RAM is {kind} followed by % (got {value!r})")
    percent = Fraction(match.group(1))
    if not 0 < percent <= 100:
        bounds = "between 1% and 100%" if whole else "above 0% and at most 100%"
        raise ValueError(f"a percentage of RAM must be {bounds} (got {value!r})")
    return percent


def tmpfs_size_option(value):
    """What tmpfs takes after size= for a size or a whole percentage of RAM: '50%' or a byte
    count such as '1073741824'; ValueError naming the problem otherwise."""
    percent = ram_percent(value, whole=True)
    if percent is not None:
        return f"{percent}%"
    number = parse_size(value)
    if number <= 0:
        raise ValueError(f"must be larger than zero (got {value!r})")
    return str(number)


def tmpfs_percent_bytes(percent, memtotal_bytes):
    """The size of a tmpfs of `percent` (a number, 0 < percent <= 100) of RAM: whole pages."""
    pages = Fraction(memtotal_bytes // PAGE) * Fraction(percent) / 100
    return math.ceil(pages) * PAGE


def tmpfs_size_bytes(option, memtotal_bytes):
    """The size the kernel gives a tmpfs mounted with size=option (tmpfs_size_option's result)
    on a host with memtotal_bytes of RAM (MemTotal)."""
    if option.endswith("%"):
        return tmpfs_percent_bytes(int(option[:-1]), memtotal_bytes)
    return -(-int(option) // PAGE) * PAGE
