"""Runs a role's validate.yml (its one `<role>_validate` action) on this machine through
ansible-playbook (connection local, nothing changed), for the unit tests of the validators:
validate() with the variables as extra variables, validate_cases() with several sets of
variables in one run, each set a host of its own (this machine again), as an inventory gives
them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.paths import CHECKOUT

PLAYBOOK = """
- hosts: {hosts}
  gather_facts: true  # the min subset, as site.yml's validation reads it
  gather_subset: [min]
  connection: local
  tasks:
    - name: Validate
      ansible.builtin.include_role:
        name: hostcheck.gpu_hosts.{role}
        tasks_from: validate
      loop: [1, 2]
"""


def validate(role: str, variables: dict, tmp_path: Path, cwd: Path = CHECKOUT) -> list[dict]:
    """The results of the validate action, run twice in one play (the second is the reuse);
    ansible-playbook runs in cwd (the checkout, or a folder of a user's own)."""
    playbook = tmp_path / "validate.yml"
    playbook.write_text(PLAYBOOK.format(hosts="localhost", role=role))
    extra = tmp_path / "vars.yml"
    extra.write_text(yaml.safe_dump(variables))
    return _results(_run([str(playbook), "-e", f"@{extra}"], cwd), ["localhost"])["localhost"]


def validate_cases(
    role: str, cases: dict[str, dict], tmp_path: Path, cwd: Path = CHECKOUT
) -> dict[str, list[dict]]:
    """validate() of each case's variables, all in one ansible-playbook run: a case is a host
    of the inventory (this machine over the local connection, with the Python ansible-playbook
    runs on, as for localhost), its variables the host's own."""
    folder = tmp_path / "cases"
    folder.mkdir(exist_ok=True)
    playbook = folder / "validate.yml"
    playbook.write_text(PLAYBOOK.format(hosts="all", role=role))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {name: {**local, **variables} for name, variables in cases.items()}
    inventory = folder / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return _results(_run([str(playbook), "-i", str(inventory)], cwd), list(cases))


def validate_each_role(variables_of: dict[str, dict], tmp_path: Path) -> dict[str, list[dict]]:
    """validate_cases() of several roles in one run: role -> its variables, validated as a host
    named for the role (include_role takes the role's name from a host variable)."""
    cases = {role: {"validated_role": role, **v} for role, v in variables_of.items()}
    return validate_cases("{{ validated_role }}", cases, tmp_path)


def _run(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _results(done: subprocess.CompletedProcess, hosts: list[str]) -> dict[str, list[dict]]:
    """Each host's results of the validate action, in the order they ran."""
    plays = json.loads(done.stdout)["plays"]
    tasks = [
        task
        for play in plays
        for task in play["tasks"]
        if task["task"]["name"].endswith(": Validate the variables")
        or task["task"]["name"] == "Validate the variables"
    ]
    return {
        host: [task["hosts"][host] for task in tasks if host in task["hosts"]] for host in hosts
    }
