"""The grouping of every role by its switch (plugins/action/role_switch.py, the one task of
playbooks/tasks/group_roles.yml that every role shares): each host joins <role>_on or
<role>_off by <role>_enabled, or the default in the role's argument spec; a value that is not
plainly off counts as on, and the validation there refuses what is not a boolean; a role that
is off costs the host nothing after that task. Run by ansible-playbook on this machine, one
local host per case."""

from __future__ import annotations

import yaml

from tests.paths import CHECKOUT as REPO
from tests.support.local_playbook import run_local

ROLES = sorted(path.parts[-3] for path in REPO.glob("roles/*/meta/argument_specs.yml"))
GROUPING = "Group the hosts by the roles that are on"
PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Group the hosts by the roles that are on
      hostcheck.gpu_hosts.role_switch:
        role: "{{ item }}"
      changed_when: false  # a group joined is no change to the host
      loop: ROLE_LIST

- hosts: "{{ groups['shm_on'] | default([]) }}"
  gather_facts: false
  tasks:
    - name: Validate shm's argument spec where it is on
      ansible.builtin.validate_argument_spec:
        argument_spec: "{{ (lookup('file', spec) | from_yaml).argument_specs.main.options }}"
      vars:
        spec: "{{ playbook_dir }}/argument_specs.yml"

- hosts: "{{ groups['slurm_healthcheck_on'] | default([]) }}"
  gather_facts: false
  tasks:
    - name: A task of the role that is off by default
      ansible.builtin.debug:
        msg: on
""".replace("ROLE_LIST", str(ROLES))
OFF = {
    "false": False,
    "string_no": "no",
    "string_off": "off",
    "zero": 0,
    "templated": "{{ 1 == 2 }}",
}
ON = {"true": True, "string_yes": "yes", "one": 1, "maybe": "maybe"}


def spec_default(role: str) -> object:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"][f"{role}_enabled"]["default"]


def test_each_host_joins_on_or_off_for_every_role_and_an_off_role_costs_nothing_more(tmp_path):
    hosts = {"default": {}}
    for case, value in {**OFF, **ON}.items():
        hosts[case] = {f"{role}_enabled": value for role in ROLES}
    (tmp_path / "argument_specs.yml").write_text(
        (REPO / "roles" / "shm" / "meta" / "argument_specs.yml").read_text()
    )
    returncode, output = run_local(tmp_path, PLAYBOOK, hosts)
    grouped, shm_validated, slurm_play = output["plays"]
    (grouping,) = grouped["tasks"]
    for name in hosts:
        items = {item["item"]: item for item in grouping["hosts"][name]["results"]}
        assert sorted(items) == ROLES
        for role, item in items.items():
            on = name in ON or (name == "default" and spec_default(role) is True)
            assert item["add_group"] == f"{role}_{'on' if on else 'off'}", (name, role, item)
            assert item["parent_groups"] == ["roles_switched"]
            assert not item.get("changed") and not item.get("failed")
    assert spec_default("slurm_healthcheck") is False
    assert {spec_default(role) for role in ROLES if role != "slurm_healthcheck"} == {True}
    said = {item["item"]: item["msg"] for item in grouping["hosts"]["default"]["results"]}
    assert said["slurm_healthcheck"] == (
        "slurm_healthcheck_enabled is false: no task of slurm_healthcheck runs here"
    )
    assert said["shm"] == "shm_enabled is true: shm is validated, provisioned and verified here"

    # off: in no later play, not even as a skipped task
    assert sorted(shm_validated["tasks"][0]["hosts"]) == sorted(["default", *ON])
    # ("maybe" failed in the play before: a host stops at its first failure)
    assert sorted(slurm_play["tasks"][0]["hosts"]) == sorted(set(ON) - {"maybe"})
    for name in OFF:
        assert output["stats"][name] == {**output["stats"][name], "ok": 1, "skipped": 0}

    # on, but not a boolean: the validation of the group refuses it, naming the variable
    refused = shm_validated["tasks"][0]["hosts"]["maybe"]
    assert refused.get("failed") and "shm_enabled" in refused["msg"], refused
    assert not shm_validated["tasks"][0]["hosts"]["true"].get("failed")
    assert returncode == 2


def test_an_unknown_role_fails_naming_it(tmp_path):
    grouping_only = PLAYBOOK.split("\n- hosts: ")[1]
    playbook = "\n- hosts: " + grouping_only.replace(str(ROLES), "[shm, nosuchrole]")
    returncode, output = run_local(tmp_path, playbook, {"h": {}})
    items = output["plays"][0]["tasks"][0]["hosts"]["h"]["results"]
    assert items[0]["add_group"] == "shm_on"
    assert items[1]["failed"]
    assert items[1]["msg"] == (
        "role: 'nosuchrole' is no role of this collection with a nosuchrole_enabled switch"
    )
    assert returncode == 2


def roles_of_plays(playbook: str, entry_point: str) -> list[tuple[str, object]]:
    """(role, the play's hosts) of each play of the playbook that imports a role's entry point."""
    found = []
    for play in yaml.safe_load((REPO / "playbooks" / playbook).read_text()):
        for task in play["tasks"]:
            imported = task.get("ansible.builtin.import_role") or {}
            if imported.get("tasks_from") == entry_point:
                found.append((imported["name"].removeprefix("hostcheck.gpu_hosts."), play["hosts"]))
    return found


def test_every_role_is_grouped_then_validated_provisioned_verified_in_one_order_where_on():
    grouping = yaml.safe_load((REPO / "playbooks" / "tasks" / "group_roles.yml").read_text())
    (task,) = [task for task in grouping if task["name"] == GROUPING]
    assert sorted(task["loop"]) == ROLES
    on = [(role, "{{ groups['" + role + "_on'] | default([]) }}") for role in task["loop"]]
    assert roles_of_plays("provision.yml", "validate") == on
    assert roles_of_plays("provision.yml", "provision") == on
    checked = [
        (role, hosts.replace("{{ ", "{{ [] if ansible_check_mode else ")) for role, hosts in on
    ]
    assert roles_of_plays("verify.yml", "verify") == checked
