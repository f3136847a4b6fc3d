"""Puts the host in the group <role>_on or <role>_off by the role's <role>_enabled: the host's
value, or else the default of the role's meta/argument_specs.yml, so the switch and its default
are said once. playbooks/tasks/group_roles.yml runs it over every role in one task, and each
role's plays are those of <role>_on: a role switched off costs a host that task's item, nothing
more. Every group it makes is a child of `roles_switched`, the hosts whose switches this run has
read. Documented in plugins/modules/role_switch.py."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE
from ansible.plugins.action import ActionBase
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import role_meta

SWITCHED = "roles_switched"


def is_on(value: object) -> bool:
    """False for what Ansible's booleans read as false (false, 'no', 'off', 0 ...), True for the
    rest, so the validation of <role>_on refuses what is not a boolean (`-e shm_enabled=maybe`)
    with the role's own message."""
    if isinstance(value, str):
        value = value.strip().lower()
    return not isinstance(value, (str, int, float)) or value not in BOOLEANS_FALSE


def switch_default(role: str) -> object:
    """The default of <role>_enabled in the role's argument spec (entry point main)."""
    options = role_meta(role, "argument_specs")["argument_specs"]["main"]["options"]
    return options[f"{role}_enabled"].get("default")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"role"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        task_vars = task_vars or {}
        role = self._task.args.get("role")
        variable = f"{role}_enabled"
        try:
            default = switch_default(str(role))
        except (OSError, KeyError, TypeError):
            result.update(
                failed=True,
                msg=f"role: {role!r} is no role of this collection with a {variable} switch",
            )
            return result
        value = self._templar.template(task_vars[variable]) if variable in task_vars else default
        on = is_on(value)
        shown = str(value).lower() if isinstance(value, bool) else value
        result.update(
            add_group=f"{role}_{'on' if on else 'off'}",
            parent_groups=[SWITCHED],
            msg=(
                f"{variable} is {shown}: {role} is validated, provisioned and verified here"
                if on
                else f"{variable} is {shown}: no task of {role} runs here"
            ),
        )
        return result
