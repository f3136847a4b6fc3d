"""Runs a role's validate.yml (its one `<role>_validate` action) on this machine through
ansible-playbook (connection local, nothing changed), for the unit tests of the validators."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.paths import CHECKOUT

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
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
    playbook.write_text(PLAYBOOK.format(role=role))
    extra = tmp_path / "vars.yml"
    extra.write_text(yaml.safe_dump(variables))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-e", f"@{extra}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    plays = json.loads(done.stdout)["plays"]
    return [
        task["hosts"]["localhost"]
        for play in plays
        for task in play["tasks"]
        if task["task"]["name"].endswith(": Validate the variables")
        or task["task"]["name"] == "Validate the variables"
    ]
