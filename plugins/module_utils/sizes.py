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
