"""The contract of a role's validate and verify actions (plugins/plugin_utils/role_action.py):
the task passes every variable of the role's argument spec, and only those, as arguments named
as the variables (the role's __<role>_arguments, by module_defaults of its action group); the
action's documentation (plugins/modules/<action>.py, what ansible-doc shows) lists the same
options with the same types and defaults; the action reads no variable its task does not pass;
Ansible's own argument-spec rules convert and refuse the values."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    RoleAction,
    argument_spec,
)

from tests.paths import CHECKOUT as REPO
from tests.support.role_arguments import tasks_calling

PREFIX = "hostcheck.gpu_hosts."
SPEC_KEYS = ("type", "elements", "default", "choices")


def role_actions() -> dict[str, type]:
    """action name -> class, for every action built on RoleAction."""
    found = {}
    for path in sorted((REPO / "plugins" / "action").glob("*.py")):
        module = importlib.import_module(
            f"ansible_collections.hostcheck.gpu_hosts.plugins.action.{path.stem}"
        )
        action = getattr(module, "ActionModule", None)
        if isinstance(action, type) and issubclass(action, RoleAction):
            found[path.stem] = action
    return found


ACTIONS = role_actions()


# playbooks/tasks/group_roles.yml's grouping of every role by its switch: no role's action
NOT_A_ROLE_ACTION = {"role_switch"}


def test_every_action_of_the_collection_is_on_the_base():
    actions = {path.stem for path in (REPO / "plugins" / "action").glob("*.py")}
    assert actions - NOT_A_ROLE_ACTION == set(ACTIONS)
    roles = {path.parts[-3] for path in REPO.glob("roles/*/meta/argument_specs.yml")}
    validated_in_yaml = {"slurm_healthcheck"}
    assert {f"{role}_validate" for role in roles - validated_in_yaml} <= actions


def options(action: str) -> dict:
    """What the action takes: the role's variables, its own constants (INTERNAL), validated."""
    return argument_spec(ACTIONS[action].ROLE, ACTIONS[action].INTERNAL)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_each_task_passes_the_role_variables_by_their_names(action):
    role = ACTIONS[action].ROLE
    variables = set(argument_spec(role)) - {"validated"}
    calls = tasks_calling(action)
    assert calls, f"no task of roles/ calls {action}"
    for path, args in calls:
        assert set(args) == set(options(action)), path
        for name in variables:
            assert args[name] == "{{ " + name + " }}", (path, name)
        for name in ACTIONS[action].INTERNAL:
            # the role's own variable (vars/main.yml, or registered earlier in the role)
            internal = r"\{\{ __" + role + r"_\w+( \| [^{}]+)? \}\}"
            assert re.fullmatch(internal, args[name]), (path, name)
        assert args["validated"] == "{{ __" + role + "_validation | default({}) }}", path


def test_each_roles_actions_are_its_action_group():
    """meta/runtime.yml groups each role's actions under the role's name, the group whose
    module_defaults give them the role's variables."""
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    grouped: dict[str, set] = {}
    for action, cls in ACTIONS.items():
        grouped.setdefault(cls.ROLE, set()).add(action)
    assert {role: set(actions) for role, actions in runtime["action_groups"].items()} == grouped


@pytest.fixture(scope="module")
def shown() -> dict:
    """ansible-doc's JSON of every module of plugins/modules (documentation fragments merged)."""
    names = [PREFIX + path.stem for path in sorted((REPO / "plugins" / "modules").glob("*.py"))]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-t", "module", "--json", *names],
        cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_documentation_lists_the_role_spec(action, shown):
    documented = shown[PREFIX + action]["doc"]["options"]
    spec = options(action)
    assert set(documented) == set(spec)
    for name, option in spec.items():
        for key in SPEC_KEYS:
            assert documented[name].get(key) == option.get(key), (action, name, key)
        assert documented[name].get("required", False) == option.get("required", False), name


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_action_reads_only_its_arguments_and_the_facts(action):
    """No task_vars lookup but the base's: ansible_facts, the host's name and the role's per-OS
    vars its validate.yml loaded (include_vars); no private objects of the task (its role)."""
    rules = REPO / "plugins" / "plugin_utils" / f"{ACTIONS[action].ROLE}_rules.py"
    source = (REPO / "plugins" / "action" / f"{action}.py").read_text()
    source += rules.read_text() if rules.exists() else ""
    base = (REPO / "plugins" / "plugin_utils" / "role_action.py").read_text()
    for text in (source, base):
        assert set(re.findall(r"self\._task\.(\w+)", text)) <= {"args"}
        assert "_templar" not in text and "_role_path" not in text
    assert 'task_vars or {}).get("ansible_facts")' in base
    assert re.findall(r"self\.task_vars\.get\(([^,)]+)", base) == [
        '"inventory_hostname"',
        'f"__{self.ROLE}_os_vars_loaded"',
    ]
    assert "task_vars[" not in source and "task_vars.get" not in source


def test_ansible_doc_shows_every_module_and_the_role_actions(shown):
    names = [PREFIX + path.stem for path in sorted((REPO / "plugins" / "modules").glob("*.py"))]
    assert {PREFIX + action for action in ACTIONS} <= set(names)
    assert set(shown) == set(names)
    for name in names:
        assert shown[name]["doc"]["short_description"], name
        assert shown[name]["return"] is not None, name
    for action in ACTIONS:
        assert "validated" in shown[PREFIX + action]["doc"]["options"], action


def test_facts_are_gathered_once_per_task_when_the_play_did_not():
    """check_platform, os_vars and the action's own reads all ask for the facts: one setup."""
    calls = []

    class Probe(RoleAction):
        ROLE = "shm"

        def _execute_module(self, module_name, module_args, task_vars):
            calls.append(module_name)
            return {"ansible_facts": {"ansible_os_family": "Debian", "ansible_kernel": "6.1.0"}}

    action = object.__new__(Probe)
    action.host_facts, action.gathered, action.task_vars = {}, {}, {}
    first, second = action.facts(), action.facts()
    assert first["os_family"] == second["os_family"] == "Debian"
    assert second["kernel"] == "6.1.0"
    assert calls == ["ansible.builtin.setup"]
    assert action.gathered == {"ansible_os_family": "Debian", "ansible_kernel": "6.1.0"}


def test_no_action_imports_another_action_or_a_module():
    """A role's decisions are in its plugins/plugin_utils/<role>_rules.py (its Validation
    too); its actions import them from there, never from one another or from a module."""
    importers = [
        *(REPO / "plugins" / "action").glob("*.py"),
        *(REPO / "plugins" / "plugin_utils").glob("*.py"),
    ]
    wrong = re.compile(
        r"^from ansible_collections\.hostcheck\.gpu_hosts\.plugins\.(action|modules)\b"
    )
    found = [
        f"{path.relative_to(REPO)}: {line}"
        for path in importers
        for line in path.read_text().splitlines()
        if wrong.match(line)
    ]
    assert found == []


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_each_action_is_its_roles_validation(action):
    """Every validate, verify and plan action stands on the Validation of its role's rules."""
    role = ACTIONS[action].ROLE
    rules = REPO / "plugins" / "plugin_utils" / f"{role}_rules.py"
    assert rules.exists(), f"{action}: no plugins/plugin_utils/{role}_rules.py"
    source = (REPO / "plugins" / "action" / f"{action}.py").read_text()
    assert f"plugin_utils.{role}_rules import" in source
    assert "class ActionModule(Validation):" in source, action
