"""The sysctl_tuning role's verify action through ansible-playbook on this machine: switched off,
it verifies nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import CHECKOUT

VERIFY_PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Verify
      ansible.builtin.include_role:
        name: hostcheck.gpu_hosts.sysctl_tuning
        tasks_from: verify
"""


def test_switched_off_it_verifies_nothing(tmp_path):
    (tmp_path / "verify.yml").write_text(VERIFY_PLAYBOOK)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            str(tmp_path / "verify.yml"),
            *("-e", json.dumps({"sysctl_tuning_enabled": False})),
        ],
        cwd=CHECKOUT,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_LOCALHOST_WARNING": "false",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (task,) = [
        task
        for play in json.loads(done.stdout)["plays"]
        for task in play["tasks"]
        if task["task"]["name"].endswith("(changes nothing)")
    ]
    assert task["hosts"]["localhost"]["msg"] == "sysctl_tuning_enabled is false: not verified"
