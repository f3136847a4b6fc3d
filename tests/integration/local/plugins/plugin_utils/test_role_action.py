"""The base of every `<role>_validate` action (plugins/plugin_utils/role_action.py) run through
ansible-playbook on this machine: the argument spec checked in the validation task itself, and a
switched-off role saying what it leaves alone."""

from __future__ import annotations

import pytest

from tests.support.role_validation import validate


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
