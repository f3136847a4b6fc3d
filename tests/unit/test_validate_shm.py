"""The shm role's validate action: shm_size and shm_mount_options, each bad value named."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.action.shm_validate import shm_values
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.unit.role_validation import validate


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


def test_the_action_validates_once_and_gives_the_same_values_again(tmp_path):
    first, again = validate("shm", {"shm_size": "25%", "shm_enabled": False}, tmp_path)
    assert first["values"] == {"option": "25%"} == again["values"]
    assert first["digest"] == again["digest"]
    assert again["msg"] == "shm: validated earlier in this run"


def test_the_action_fails_naming_the_variable(tmp_path):
    (failed,) = validate("shm", {"shm_size": "150%"}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"].startswith("shm_size: a percentage of RAM must be between 1% and 100%")
