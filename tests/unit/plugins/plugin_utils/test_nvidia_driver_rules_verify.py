"""The nvidia_driver role's verify action on plain data: what the probe read compared with the
validated values (branch, module, holds, nouveau, Fabric Manager, a pending reboot); the
messages are those operators look for. And the validate action's decision to install."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    driver_problems,
    driver_verified,
    installs_here,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

KERNEL = "6.1.0-25-amd64"
NOUVEAU_FILE = "/etc/modprobe.d/hostcheck-blacklist-nouveau.conf"
CHECKS = {"hold": True, "blacklist_nouveau": True, "nouveau_file": NOUVEAU_FILE}
GPU = {"address": "0000:3b:00.0", "device": "0x2330", "class": "0x030200"}
NVSWITCH = {"address": "0000:5a:00.0", "device": "0x22a3", "class": "0x068000"}


def values(manager: str = "apt", **wanted) -> dict:
    return {
        "wanted": {
            "branch": "550",
            "fabric_manager": "auto",
            "reboot_ok": False,
            "fail_if_reboot_required": False,
            **wanted,
        },
        "plan": {
            "hold": ["nvidia-driver-pinning-550", "nvidia-open"],
            "fabric_manager": ["nvidia-fabricmanager"],
        },
        "os_vars": {"__nvidia_driver_package_manager": manager},
    }


def probe(**changes) -> dict:
    """A Debian host with branch 550 installed, held, built, loaded and nouveau blacklisted."""
    found = {
        "gpus": [GPU],
        "nvswitches": [],
        "kernel": KERNEL,
        "loaded_version": "550.54.15",
        "built_version": "550.54.15",
        "nouveau_loaded": False,
        "nouveau_blacklisted": True,
        "packages": {
            "nvidia-driver-pinning-550": "550.54.15-1",
            "nvidia-open": "550.54.15-1",
            "nvidia-persistenced": "550.54.15-1",
        },
        "held": ["nvidia-driver-pinning-550", "nvidia-open"],
        "driver_version": "550.54.15",
        "dnf_stream": None,
    }
    return {**found, **changes}


def test_an_installed_driver_as_wanted_is_verified():
    assert driver_verified(probe(), values(), CHECKS) == (
        f"driver 550.54.15 (branch 550), module for {KERNEL}: 550.54.15, loaded: 550.54.15"
    )
    assert driver_verified(probe(loaded_version=None), values(), CHECKS).endswith("loaded: nothing")


def test_drift_names_every_problem():
    """Someone unheld the driver, removed the blacklist and the module of the running kernel."""
    drifted = probe(
        held=["nvidia-driver-pinning-550"], nouveau_blacklisted=False, built_version=None
    )
    with pytest.raises(Invalid) as failed:
        driver_verified(drifted, values(), CHECKS)
    assert str(failed.value) == (
        f"no nvidia module for the running kernel {KERNEL} (modinfo): the DKMS build failed or "
        "the headers are missing; see dkms status | not held: nvidia-open | "
        f"{NOUVEAU_FILE} does not blacklist nouveau"
    )


def test_what_the_variables_switch_off_is_not_checked():
    drifted = probe(held=[], nouveau_blacklisted=False)
    assert (
        driver_problems(drifted, values(), {**CHECKS, "hold": False, "blacklist_nouveau": False})
        == []
    )
    # dnf versionlock is not read back as holds
    assert driver_problems(probe(held=[]), values("dnf"), CHECKS) == []


def test_another_branch_beside_the_wanted_one_is_named():
    packages = {**probe()["packages"], "nvidia-utils-535": "535.183.01-1"}
    assert driver_problems(probe(packages=packages), values(), CHECKS) == [
        "installed branches 550, 535, wanted only 550"
    ]
    assert driver_problems(
        probe(packages={}, built_version=None, loaded_version=None, held=[]), values(), CHECKS
    )[0] == ("installed branches none, wanted only 550")


def test_fabric_manager_at_another_version_is_named_where_it_belongs():
    packages = {**probe()["packages"], "nvidia-fabricmanager": "550.40.07-1"}
    assert driver_problems(probe(packages=packages), values(), CHECKS) == []  # no NVSwitch
    assert driver_problems(probe(packages=packages, nvswitches=[NVSWITCH]), values(), CHECKS) == [
        "Fabric Manager not at the driver version: nvidia-fabricmanager 550.40.07-1"
    ]


def test_a_pending_reboot_fails_only_when_asked():
    pending = probe(loaded_version="550.40.07")
    assert driver_problems(pending, values(), CHECKS) == []
    assert driver_problems(pending, values(fail_if_reboot_required=True), CHECKS) == [
        "a reboot is needed (the loaded module is 550.40.07, the installed driver 550.54.15); "
        "set nvidia_driver_reboot_ok: true to let the role reboot, or reboot the host yourself"
    ]


def test_the_driver_is_installed_where_a_gpu_is_or_when_told():
    assert installs_here({"gpus": [GPU]}, True) is True
    assert installs_here({"gpus": []}, True) is False
    assert installs_here({"gpus": []}, False) is True
