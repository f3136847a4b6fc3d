"""The nvidia_driver role's validate action through ansible-playbook on this machine."""

from __future__ import annotations

from tests.support.role_validation import validate

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"


def test_the_action_works_out_this_machines_plan_once(tmp_path):
    first, again = validate("nvidia_driver", {}, tmp_path)
    assert "failed" not in first, first.get("msg")
    got = first["values"]
    assert got["wanted"]["branch"] == "570"
    major = got["os"]["name"].split()[1].split(".")[0]
    assert got["os_vars"]["__nvidia_driver_cuda_repo_os"] in (f"debian{major}", f"rhel{major}")
    assert got["plan"]["repository"]["url"].startswith(CUDA)
    assert again["values"] == got and again["digest"] == first["digest"]
    assert again["msg"] == "nvidia_driver: validated earlier in this run"


def test_the_action_fails_naming_the_variable(tmp_path):
    # a value the argument specs let through (a string) but that is no driver branch
    (failed,) = validate("nvidia_driver", {"nvidia_driver_branch": "latest"}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"] == (
        "nvidia_driver_branch: a driver branch: its three-digit major version, e.g. '570'; "
        "got 'latest'"
    )


def test_switched_off_only_the_switch_is_checked(tmp_path):
    first, _ = validate(
        "nvidia_driver",
        {"nvidia_driver_enabled": False, "nvidia_driver_reboot_timeout": 1},
        tmp_path,
    )
    assert first["values"] == {} and "failed" not in first
