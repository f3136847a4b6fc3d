"""The suite's callback that loads ansible-core's Jinja2 filter and test plugins before the
forks (tests/integration/callback_plugins/hostcheck_jinja_plugins.py): a task's worker finds
them already loaded with it, and loads them itself without it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.integration import ansible
from tests.integration.ansible import ANSIBLE_BIN, CHECKOUT, CHECKOUT_CONTROLLER

# An action plugin that templates nothing: which builtin Jinja2 plugin modules its worker has.
LOADED_IN_THE_WORKER = """
import sys
from ansible.plugins.action import ActionBase

class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        kinds = ("ansible.plugins.filter.", "ansible.plugins.test.")
        names = sorted(m.rsplit("_", 1)[0] for m in sys.modules if m.startswith(kinds))
        return {"changed": False, "loaded": names}
"""


def loaded_in_the_worker(tmp_path: Path, callbacks: dict[str, str]) -> list[str]:
    (tmp_path / "action_plugins").mkdir(exist_ok=True)
    (tmp_path / "action_plugins" / "jinja_plugins_loaded.py").write_text(LOADED_IN_THE_WORKER)
    playbook = tmp_path / "loaded.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - jinja_plugins_loaded:\n"
    )
    done = subprocess.run(
        [str(ANSIBLE_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)],
        capture_output=True,
        text=True,
        env=CHECKOUT_CONTROLLER.environment(
            ANSIBLE_STDOUT_CALLBACK="json",
            ANSIBLE_PYTHON_INTERPRETER=sys.executable,
            **callbacks,
        ),
        cwd=CHECKOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    output = json.loads(done.stdout[done.stdout.index("{") :])
    return output["plays"][0]["tasks"][0]["hosts"]["localhost"]["loaded"]


def test_the_workers_inherit_the_plugins_the_callback_loaded(tmp_path):
    assert loaded_in_the_worker(tmp_path, {}) == []
    loaded = loaded_in_the_worker(
        tmp_path,
        {
            "ANSIBLE_CALLBACK_PLUGINS": str(ansible.SUITE_CALLBACK_PLUGINS),
            "ANSIBLE_CALLBACKS_ENABLED": "hostcheck_jinja_plugins",
        },
    )
    assert "ansible.plugins.filter.core" in loaded and "ansible.plugins.test.core" in loaded
