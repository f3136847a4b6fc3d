"""A role's variables checked as every `<role>_validate` action checks them first, before its
own checks: by the role's meta/argument_specs.yml (RoleAction.checked_arguments), without a
play. The role's defaults fill in the variables not given. And the roles' tasks calling an
action, with the arguments they pass (their own, and the role's variables that module_defaults
gives the role's action group)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

from tests.paths import CHECKOUT as REPO

PREFIX = "hostcheck.gpu_hosts."


def checked(role: str, variables: dict) -> dict:
    """The variables as the spec converts them, with the defaults of those not given."""

    class Action(RoleAction):
        ROLE = role

    action = object.__new__(Action)
    action._task = SimpleNamespace(args=dict(variables))
    return action.checked_arguments()


def spec_refusal(role: str, variables: dict) -> str:
    """The message the role's validate action fails with when the spec refuses the variables."""
    with pytest.raises(Invalid) as refused:
        checked(role, variables)
    message = str(refused.value)
    assert message.startswith(f"{role}: validation of arguments failed: ")
    return message


def tasks_calling(action: str) -> list[tuple[Path, dict]]:
    """Every task of roles/*/tasks calling the action (inside blocks too), with its arguments."""

    def tasks(listed: list) -> list[dict]:
        found = []
        for task in listed or []:
            found.append(task)
            for section in ("block", "rescue", "always"):
                found += tasks(task.get(section))
        return found

    calls = []
    for path in sorted((REPO / "roles").rglob("tasks/*.yml")):
        for task in tasks(yaml.safe_load(path.read_text())):
            if PREFIX + action in task:
                defaults = given_by_module_defaults(path.parts[-3], task)
                calls.append((path, {**defaults, **task[PREFIX + action]}))
    return calls


def given_by_module_defaults(role: str, task: dict) -> dict:
    """What the task's module_defaults give the role's action group: the role's
    __<role>_arguments of vars/main.yml, when it names them."""
    given = (task.get("module_defaults") or {}).get(f"group/{PREFIX}{role}")
    if given is None:
        return {}
    assert given == "{{ __" + role + "_arguments }}", (role, given)
    role_vars = yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text())
    return role_vars[f"__{role}_arguments"]
