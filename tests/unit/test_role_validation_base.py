"""The base of every `<role>_validate` action (plugins/plugin_utils/role_validation.py): the
role's argument spec is checked in the validation task itself, and a switched-off role says
what it leaves alone, run through ansible-playbook on this machine."""

from __future__ import annotations

import pytest

from tests.unit.role_validation import validate


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"shm_mount_options": {"nosuid": 1}}, "shm_mount_options"),
        ({"ulimits_systemd_enabled": "sometimes"}, "ulimits_systemd_enabled"),
        ({"shm_enabled": [True]}, "shm_enabled"),
    ],
)
def test_the_argument_spec_is_checked_before_the_roles_own_checks(tmp_path, variables, named):
    role = next(iter(variables)).split("_")[0]
    (result,) = validate(role, variables, tmp_path)[:1]
    assert result["failed"] is True
    assert result["msg"].startswith(f"{role}: validation of arguments failed: ")
    assert named in result["msg"]
    assert "\n" not in result["msg"]


def test_a_switched_off_role_says_what_it_leaves_alone(tmp_path):
    first, again = validate("shm", {"shm_enabled": False}, tmp_path)
    assert first["msg"] == "shm_enabled is false: /dev/shm left as it is"
    # the second validation in the run reuses the first and says nothing more
    assert again["msg"] == "shm: validated earlier in this run"
    assert first["values"] == again["values"] == {"option": "50%"}


def test_per_os_vars_that_a_role_requires_name_the_os_when_missing(tmp_path):
    from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
        Invalid,
        RoleValidation,
    )

    (tmp_path / "vars").mkdir()
    (tmp_path / "vars" / "Debian.yml").write_text("__demo_packages: [a, b]\n")
    action = RoleValidation.__new__(RoleValidation)
    action.role, action.role_path, action.gathered = "demo", str(tmp_path), {}
    facts = {"distribution": "Plan9", "distribution_version": "4", "os_family": "Plan9"}
    action.host_facts = {**facts, "kernel": "6.1"}
    candidates = ["{distribution}", "{os_family}"]
    assert action.os_vars(candidates) == {}
    with pytest.raises(Invalid) as refused:
        action.os_vars(candidates, required=True)
    assert str(refused.value) == "demo_enabled: no vars file in roles/demo/vars for Plan9 4"
    action.host_facts["os_family"] = "Debian"
    assert action.os_vars(candidates, required=True) == {"__demo_packages": ["a", "b"]}
