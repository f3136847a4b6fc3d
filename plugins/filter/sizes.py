"""Sizes in role variables, checked strictly so a bad value stops the play before any change.

{{ shm_size | size_to_bytes('shm_size') }}                 bytes, or an error naming shm_size
{{ shm_size | tmpfs_size_option('shm_size') }}             what tmpfs accepts after size=
{{ shm_size | tmpfs_size_bytes('shm_size', memtotal_kib) }} the size the kernel will give
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import parse_size

_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")
PAGE = 4096


def _fail(name: str, value: object, why: str) -> AnsibleFilterError:
    return AnsibleFilterError(f"{name}: {why} (got {value!r})")


def size_to_bytes(value: object, name: str = "size") -> int:
    """A positive number of bytes from a size as module_utils/sizes.py reads it (KB, MB, GB
    decimal; KiB, MiB, GiB and K, M, G binary; a plain number is bytes)."""
    try:
        number = parse_size(value)
    except ValueError as exc:
        raise _fail(name, value, str(exc)) from None
    if number <= 0:
        raise _fail(name, value, "must be larger than zero")
    return number


def _percent(value: object, name: str) -> int | None:
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if match:
            percent = int(match.group(1))
            if not 1 <= percent <= 100:
                raise _fail(name, value, "a percentage of RAM must be between 1% and 100%")
            return percent
        if "%" in value:
            raise _fail(name, value, "a percentage of RAM is a whole number followed by %")
    return None


def tmpfs_size_option(value: object, name: str = "size") -> str:
    """The value for tmpfs size=: N% or a byte count."""
    percent = _percent(value, name)
    if percent is not None:
        return f"{percent}%"
    return str(size_to_bytes(value, name))


def tmpfs_size_bytes(value: object, name: str, memtotal_kib: object) -> int:
    """The size the kernel gives a tmpfs mounted with size=value: whole pages, and a
    percentage taken of the RAM pages (MemTotal)."""
    try:
        total = int(memtotal_kib) * 1024
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"{name}: MemTotal not known ({memtotal_kib!r})") from None
    percent = _percent(value, name)
    if percent is not None:
        return -(-(total // PAGE) * percent // 100) * PAGE
    size = size_to_bytes(value, name)
    return -(-size // PAGE) * PAGE


class FilterModule:
    def filters(self):
        return {
            "size_to_bytes": size_to_bytes,
            "tmpfs_size_option": tmpfs_size_option,
            "tmpfs_size_bytes": tmpfs_size_bytes,
        }
