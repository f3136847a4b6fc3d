"""One meaning of KB/MB/GB/KiB/MiB/GiB and K/M/G everywhere a size is read
(plugins/module_utils/sizes.py): a table over every place that accepts one, hostcheck's
profiles and the roles' shm_size, ulimits memlock and dataset_staging_raid_chunk. "64GB" used
to be 64 * 10**9 bytes in a profile, 64 * 2**30 as shm_size, and refused for memlock."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    _chunk_kib,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.shm_rules import shm_values
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    ulimits_conf_value,
)
from hostcheck._shared.sizes import parse_size

from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile

GB, GiB = 10**9, 2**30
WRITTEN = {
    "64GB": 64 * GB,
    "64gb": 64 * GB,
    "64GiB": 64 * GiB,
    "64G": 64 * GiB,
    "64g": 64 * GiB,
    "512MB": 512 * 10**6,
    "512MiB": 512 * 2**20,
    "512M": 512 * 2**20,
    "512K": 512 * 1024,
    "512KB": 512 * 1000,
    "2TB": 2 * 10**12,
    "4096": 4096,
}


def profile_bytes(text: str) -> int:
    profile = load_profile("default", profile_schema(), assignments=[f"shm.min_free={text}"])
    return parse_size(profile.values["checks"]["shm"]["min_free"])


def memlock_bytes(text: str) -> int | None:
    try:
        return int(ulimits_conf_value(text, "ulimits_memlock_soft", "memlock")) * 1024
    except AnsibleFilterError:
        return None


def chunk_bytes(text: str) -> int | None:
    try:
        return _chunk_kib(text) * 1024
    except Invalid:
        return None


PLACES = {
    "hostcheck profile (shm.min_free)": profile_bytes,
    "hostcheck --batch-bytes and profiles (parse_size)": parse_size,
    "shm_size (as tmpfs size=)": lambda text: int(shm_values(text, [])["option"]),
    "ulimits memlock": memlock_bytes,
    "dataset_staging_raid_chunk": chunk_bytes,
}
# A plain number is bytes everywhere but in limits.conf, which counts KiB.
PLAIN_IS_KIB = {"ulimits memlock"}
# Places that accept only some sizes: memlock whole KiB, the chunk a power of two of KiB.
REFUSES = {
    "ulimits memlock": lambda size: size % 1024 != 0,
    "dataset_staging_raid_chunk": lambda size: size % 1024 or (size // 1024) & (size // 1024 - 1),
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize(("text", "size"), sorted(WRITTEN.items()))
def test_a_size_means_the_same_bytes_everywhere(place, text, size):
    got = PLACES[place](text)
    if text.isdigit() and place in PLAIN_IS_KIB:
        assert got == size * 1024
    elif place in REFUSES and REFUSES[place](size):
        assert got is None, f"{place} read {text!r} as {got} instead of refusing it"
    else:
        assert got == size, f"{place} read {text!r} as {got}, not {size}"


def test_the_table_has_decimal_and_binary_sizes_each_place_accepts():
    for place, read in PLACES.items():
        accepted = {text for text in WRITTEN if read(text) is not None}
        assert {"64GiB", "64G"} <= accepted or place == "dataset_staging_raid_chunk", place
    assert memlock_bytes("64GB") == 64 * GB  # decimal and whole KiB: accepted
    assert chunk_bytes("512K") == chunk_bytes("512KiB") == 512 * 1024
