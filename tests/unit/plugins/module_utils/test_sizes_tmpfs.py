"""tmpfs sizes (plugins/module_utils/sizes.py) as shm_size gives them, against the kernel's own
tmpfs arithmetic; a bad shm_size is named by the shm role's validation."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.shm_rules import shm_values
from hostcheck._shared.sizes import (
    tmpfs_size_bytes,
    tmpfs_size_option,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("64G", 64 * 2**30),
        ("512m", 512 * 2**20),
        ("2GiB", 2 * 2**30),
        ("1TB", 10**12),
        ("64GB", 64 * 10**9),
        ("1.5G", 3 * 2**29),
        (4096, 4096),
        ("4096", 4096),
    ],
)
def test_sizes(value, expected):
    assert int(tmpfs_size_option(value)) == expected


@pytest.mark.parametrize(
    "value", ["-1G", "0", 0, -5, "0.0001K", "12 parsecs", "G", "10iB", "", None, True, [1], "5QB"]
)
def test_bad_sizes_name_the_variable(value):
    with pytest.raises(Invalid, match=r"^shm_size: "):
        shm_values(value, [])


@pytest.mark.parametrize("value", ["0%", "101%", "150%", "12.5%", "%"])
def test_bad_percentages(value):
    with pytest.raises(Invalid, match=r"^shm_size: .*percentage"):
        shm_values(value, [])


def test_tmpfs_option():
    assert tmpfs_size_option("50%") == "50%"
    assert tmpfs_size_option("1G") == str(2**30)


@given(st.integers(min_value=1, max_value=2**50))
def test_bytes_round_up_to_pages(size):
    got = tmpfs_size_bytes(str(size), 2**20)
    assert got % 4096 == 0 and size <= got < size + 4096


@given(st.text(max_size=12))
def test_arbitrary_text_is_a_size_or_a_named_error(text):
    try:
        option = shm_values(text, [])["option"]
    except Invalid as exc:
        assert str(exc).startswith("shm_size: ")
    else:
        assert option.endswith("%") or int(option) > 0


@pytest.mark.real
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
@pytest.mark.parametrize("value", ["37%", "50%", "1%", "1000001", "64m"])
def test_matches_what_the_kernel_gives(value):
    """Mount a tmpfs in a private mount namespace and compare its size with tmpfs_size_bytes."""
    option = tmpfs_size_option(value)
    script = (
        "d=$(mktemp -d) && mount -t tmpfs -o size=" + option + " t $d && "
        "df -B1 --output=size $d | tail -1; umount $d; rmdir $d"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, check=True
    )
    with open("/proc/meminfo") as handle:
        memtotal_kib = int(handle.readline().split()[1])
    assert int(done.stdout) == tmpfs_size_bytes(option, memtotal_kib * 1024)
