"""A role's variables checked as every `<role>_validate` action checks them first, before its
own checks: by the role's meta/argument_specs.yml (RoleAction.checked_arguments), without a
play. The role's defaults fill in the variables not given."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)


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
