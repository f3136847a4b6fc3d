"""The base of every `<role>_validate` action (plugins/plugin_utils/role_action.py): the
role's argument spec is checked in the validation task itself, and a switched-off role says
what it leaves alone, run through ansible-playbook on this machine."""

from __future__ import annotations

import pytest

from tests.support.os_vars import loaded


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
    # validate.yml's include_vars task found no file for Plan9: it loaded nothing
    assert loaded("ulimits", action.host_facts) is None
    assert action.os_vars() == {}
    with pytest.raises(Invalid) as refused:
        action.os_vars(required=True)
    assert str(refused.value) == (
        "ulimits_enabled: no vars file in roles/ulimits/vars loaded for Plan9 4 (the role's "
        "tasks/validate.yml loads it, before this task)"
    )
    action.host_facts["os_family"] = "Debian"
    action.task_vars["__ulimits_os_vars_loaded"] = loaded("ulimits", action.host_facts)
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
