"""The sysctl_tuning role's validate action through ansible-playbook on this machine (switched off:
the kernel is not read)."""

from __future__ import annotations

from tests.support.role_validation import validate


def test_the_action_validates_every_time(tmp_path):
    first, again = validate(
        "sysctl_tuning",
        {"sysctl_tuning_enabled": False, "sysctl_tuning_settings": {"vm.swappiness": [10]}},
        tmp_path,
    )
    values = {"wanted": {"vm.swappiness": "10"}, "changes": []}
    assert first["values"] == values == again["values"]
    assert first["digest"] == again["digest"]
    # validated afresh (no "validated earlier"), and the switched-off role says so each time
    assert (
        first["msg"]
        == again["msg"]
        == "sysctl_tuning_enabled is false: sysctls, CPU governor and THP left as they are"
    )


def test_the_action_fails_naming_the_variable(tmp_path):
    (failed,) = validate(
        "sysctl_tuning",
        {"sysctl_tuning_enabled": False, "sysctl_tuning_file": "/etc/sysctl.conf"},
        tmp_path,
    )
    assert failed["failed"] is True
    assert failed["msg"].startswith("sysctl_tuning_file: a file directly in /etc/sysctl.d")
