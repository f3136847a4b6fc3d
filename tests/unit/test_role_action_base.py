"""The base of every `<role>_validate` action (plugins/plugin_utils/role_action.py): the
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


def test_per_os_vars_that_a_role_requires_name_the_os_when_missing():
    from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
        Invalid,
        RoleAction,
    )

    class Ulimits(RoleAction):
        ROLE = "ulimits"

    action = object.__new__(Ulimits)
    action.gathered, action.task_vars = {}, {}
    facts = {"distribution": "Plan9", "distribution_version": "4", "os_family": "Plan9"}
    action.host_facts = {**facts, "distribution_major_version": "4", "kernel": "6.1"}
    assert action.os_vars() == {}
    with pytest.raises(Invalid) as refused:
        action.os_vars(required=True)
    assert str(refused.value) == "ulimits_enabled: no vars file in roles/ulimits/vars for Plan9 4"
    action.host_facts["os_family"] = "Debian"
    pam_fix = action.os_vars(required=True)["__ulimits_pam_fix"]
    assert "/etc/pam.d/{service}" in pam_fix  # not a fact: left for the action to fill in


def test_fact_fields_of_a_vars_file_are_filled_in_and_other_braces_kept():
    from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
        with_facts,
    )

    facts = {"distribution_major_version": "12", "architecture": "x86_64"}
    loaded = {"key": "debian-{distribution_major_version}", "paths": ["/usr/lib/{architecture}"]}
    assert with_facts(loaded, facts) == {"key": "debian-12", "paths": ["/usr/lib/x86_64"]}
    assert with_facts("{service} {{ jinja }} {unknown}", facts) == "{service} {{ jinja }} {unknown}"
    assert with_facts(5, facts) == 5


def test_a_fraction_where_text_is_wanted_is_refused_not_converted(tmp_path):
    """The argument spec would turn 12.10 (YAML's 12.1) into '12.1': refused by name."""
    (failed,) = validate("cuda_check", {"cuda_check_min_driver_version": 550.10}, tmp_path)[:1]
    assert failed["failed"] is True
    assert failed["msg"] == (
        "cuda_check_min_driver_version: text, quoted (unquoted, YAML reads 12.10 as the number "
        "12.1); got 550.1"
    )


def test_text_where_a_mapping_is_wanted_is_refused_not_converted(tmp_path):
    """The spec would read 'vm.swappiness=5' as {'vm.swappiness': '5'}: every other entry gone."""
    given = {"sysctl_tuning_settings": "vm.swappiness=5"}
    (failed,) = validate("sysctl_tuning", given, tmp_path)[:1]
    assert failed["failed"] is True
    assert failed["msg"] == (
        'sysctl_tuning_settings: a mapping (YAML, or JSON with -e), got the text "vm.swappiness=5"'
    )
