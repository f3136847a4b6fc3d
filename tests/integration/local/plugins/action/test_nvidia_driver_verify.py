"""The nvidia_driver role's validate action through ansible-playbook on this machine, which has no
NVIDIA GPU: noted, and verify reads nothing more."""

from __future__ import annotations

import pytest

from tests.support.role_validation import validate


def test_this_machine_without_a_gpu_is_noted_and_verify_reads_nothing_more(tmp_path):
    """The validation reads the host once; without a GPU it says so and verify skips."""
    first, again = validate("nvidia_driver", {}, tmp_path)
    assert "failed" not in first, first.get("msg")
    found = first["values"]["probe"]
    assert set(found) >= {"gpus", "packages", "held", "kernel", "nouveau_blacklisted"}
    if found["gpus"]:
        pytest.skip("this machine has an NVIDIA GPU")
    assert first["values"]["install"] is False
    assert first["msg"] == (
        "localhost: no NVIDIA GPU on the PCI bus (no vendor 0x10de display controller in "
        "/sys/bus/pci/devices): the NVIDIA driver is not installed here "
        "(nvidia_driver_skip_without_gpu: false installs it anyway)"
    )
    assert again["values"] == first["values"]
