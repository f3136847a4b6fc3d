"""ansible-playbook on this machine for the local integration tests of a role's YAML: the
playbook and an inventory of local hosts (this machine over the local connection, one host per
case, with the case's variables) written into a folder and run there, with the checkout's
ansible.cfg and the json callback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.paths import CHECKOUT


def run_local(folder: Path, playbook: str, hosts: dict[str, dict]) -> tuple[int, dict]:
    """The exit status and the json callback's output of `playbook` on the hosts named, each
    with its variables."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"hosts": {name: {**local, **v} for name, v in hosts.items()}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (folder / "playbook.yml").write_text(playbook)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "hosts.yml", "playbook.yml"],
        cwd=folder,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, json.loads(done.stdout)
