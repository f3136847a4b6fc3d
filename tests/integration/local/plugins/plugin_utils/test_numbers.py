"""Each role's validation checks its numeric variables' ranges, run through ansible-playbook on
this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import BIN
from tests.paths import CHECKOUT as REPO
from tests.support.number_ranges import RANGED


@pytest.mark.parametrize("role", sorted({role for role, _ in RANGED.values()}))
def test_each_roles_validation_checks_its_ranges(role, tmp_path):
    """The role's validate tasks, run on this machine, stop at one out-of-range value."""
    name, (low, _, _) = next((n, spec) for n, (r, spec) in RANGED.items() if r == role)
    book = tmp_path / "validate.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: true\n  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        f"        name: hostcheck.gpu_hosts.{role}\n        tasks_from: validate\n"
    )
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book),
         "-e", json.dumps({name: low - 6, "ansible_python_interpreter": sys.executable})],
        cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
             "PATH": f"{BIN}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[-3000:]
    assert f"{name}: a whole number of" in done.stdout, done.stdout[-3000:]
    assert "changed=0" in done.stdout
