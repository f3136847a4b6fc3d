"""The playbooks and roles pass Ansible's own syntax check and ansible-lint's production profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    "PATH": f"{BIN}:{os.environ['PATH']}",
}
PLAYBOOKS = [
    "site.yml",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "playbooks").glob("*.yml")),
]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook):
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "inventory/hosts.yml", playbook],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ansible_lint_production_profile():
    done = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in done.stderr + done.stdout
