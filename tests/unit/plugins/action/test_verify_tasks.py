"""Each role's verify.yml against its `<role>_verify` action: the task's arguments are what the
action's argument spec takes, and once READING's names are taken out of them, every argument
the validation and the verification read is still in self.args (pillow_simd_verify once had
READING = INTERNAL: number_ranges was gone, a KeyError in every verify)."""

from __future__ import annotations

import importlib
import inspect
import re
from types import SimpleNamespace
from typing import ClassVar

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    RoleAction,
    argument_spec,
)

from tests.paths import CHECKOUT as REPO
from tests.support.role_arguments import tasks_calling

VERIFIED = sorted(
    path.stem.removesuffix("_verify") for path in (REPO / "plugins" / "action").glob("*_verify.py")
)
# "{{ name }}" or "{{ name | default(...) }}", as the roles' tasks pass the arguments
PASSED = re.compile(r"\{\{ (\w+)(?: \| default\((.*)\))? \}\}")
MINIMAL = {"str": "", "path": "/", "int": 0, "bool": False, "list": [], "dict": {}, "raw": ""}


def action_class(role: str) -> type[RoleAction]:
    module = importlib.import_module(
        f"ansible_collections.hostcheck.gpu_hosts.plugins.action.{role}_verify"
    )
    return module.ActionModule


def verify_task_args(role: str) -> dict:
    """The arguments of the task of roles/<role>/tasks/verify.yml calling <role>_verify."""
    verify = REPO / "roles" / role / "tasks" / "verify.yml"
    calls = [args for path, args in tasks_calling(f"{role}_verify") if path == verify]
    assert len(calls) == 1, f"{verify} calls {role}_verify {len(calls)} times"
    return calls[0]


def role_values(role: str) -> dict:
    """The role's defaults/main.yml and vars/main.yml as written (templates not rendered)."""
    values = {}
    for name in ("defaults", "vars"):
        path = REPO / "roles" / role / name / "main.yml"
        if path.is_file():
            values.update(yaml.safe_load(path.read_text()) or {})
    return values


def given(role: str, args: dict, spec: dict) -> dict:
    """The task's arguments with a value each: the role's own where it is not a template, the
    default the task gives for a result registered later in the run (omit: left out), else
    the spec's default or the least value of the spec's type."""
    known = role_values(role)
    values = {}
    for name, passed in args.items():
        variable, default = PASSED.fullmatch(passed).groups()
        option = spec[name]
        if variable in known and "{{" not in str(known[variable]):
            values[name] = known[variable]
        elif default == "omit":
            continue
        elif default is not None:
            values[name] = yaml.safe_load(default)
        elif option.get("default") is not None:
            values[name] = option["default"]
        elif option.get("choices"):
            values[name] = option["choices"][0]
        else:
            values[name] = MINIMAL[option.get("type", "str")]
    return values


def read_by(action: type[RoleAction], pattern: str) -> set[str]:
    """The names pattern finds (given as literal strings) in the action's own classes, those
    it is built from above the base."""
    classes = [
        cls for cls in action.__mro__ if issubclass(cls, RoleAction) and cls is not RoleAction
    ]
    return {name for cls in classes for name in re.findall(pattern, inspect.getsource(cls))}


@pytest.mark.parametrize("role", VERIFIED)
def test_the_verify_task_passes_what_the_action_reads(role):
    action = action_class(role)
    spec = argument_spec(role, action.INTERNAL)
    args = verify_task_args(role)
    assert set(args) == set(spec)

    instance = object.__new__(action)
    instance._task = SimpleNamespace(args=given(role, args, spec))
    instance.take_arguments()
    assert set(instance.reading) == set(action.READING)
    assert not set(action.READING) & set(instance.args)
    assert read_by(action, r'self\.reading\["(\w+)"\]') <= set(action.READING)
    read = read_by(action, r'self\.args?(?:\("|\["|\.get\(")(\w+)"')
    if "number_ranges" in action.INTERNAL:
        read.add("number_ranges")  # the base checks the numbers against it
    missing = read - set(instance.args)
    assert not missing, f"{role}_verify reads {sorted(missing)}, taken out of self.args (READING)"
    instance.check_number_ranges()
    assert isinstance(instance.enabled(), bool)


@pytest.mark.parametrize(
    ("reading", "refused"),
    [
        ({"number_ranges": {"type": "dict"}}, "READING: a tuple of names of INTERNAL options"),
        (("probe_run",), "READING names ['probe_run'], not options of INTERNAL"),
    ],
)
def test_reading_is_a_tuple_of_internal_names(reading, refused):
    with pytest.raises(TypeError, match=re.escape(refused)):

        class Action(RoleAction):
            ROLE = "pillow_simd"
            INTERNAL: ClassVar[dict] = {"number_ranges": {"type": "dict", "required": True}}
            READING = reading
