"""The shm role's validate action: shm_size and shm_mount_options, each bad value named."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.action.shm_validate import shm_values
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


def test_sizes_become_the_tmpfs_option():
    assert shm_values("50%", ["nosuid", "nodev"]) == {"option": "50%"}
    assert shm_values("1GiB", []) == {"option": str(1 << 30)}


@pytest.mark.parametrize("size", ["-1G", "12 parsecs", "150%", "64XB"])
def test_bad_sizes_name_shm_size(size):
    with pytest.raises(Invalid, match=r"^shm_size: "):
        shm_values(size, [])


@pytest.mark.parametrize("options", [["size=1G"], ["no spaces"], "nosuid", [1]])
def test_bad_options_name_shm_mount_options(options):
    with pytest.raises(Invalid, match=r"^shm_mount_options: "):
        shm_values("1G", options)
