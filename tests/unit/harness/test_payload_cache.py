"""The suite's cache of module payloads across ansible-playbook runs (tests/integration/
ansible.py, callback_plugins/hostcheck_payload_cache.py): named by what payloads are built
from (a controller's ansible-core release among them), on when the suite turns it on, and a
second run takes the payload the first one built."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration import ansible
from tests.integration.ansible import ANSIBLE_BIN, CHECKOUT, CHECKOUT_CONTROLLER, Controller


def test_the_key_follows_the_content_of_the_collections_modules(tmp_path):
    for folder in ("plugins/modules", "plugins/module_utils"):
        shutil.copytree(CHECKOUT / folder, tmp_path / folder)
    key = ansible.payload_cache_key(tmp_path)
    assert key == ansible.payload_cache_key(tmp_path)
    assert key == ansible.payload_cache_key(CHECKOUT)
    module = next((tmp_path / "plugins/module_utils").rglob("*.py"))
    module.write_text(module.read_text() + "\n# changed\n")
    assert ansible.payload_cache_key(tmp_path) != key
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/new.py").write_text("x = 1\n")  # not what a payload is built from
    changed = ansible.payload_cache_key(tmp_path)
    assert ansible.payload_cache_key(tmp_path) == changed


def test_it_is_on_when_the_suite_turns_it_on_keyed_by_each_controllers_core(monkeypatch, tmp_path):
    monkeypatch.delenv(ansible.PAYLOAD_CACHE_SWITCH, raising=False)
    assert ansible.payload_cache_environment(CHECKOUT_CONTROLLER) == {}
    monkeypatch.setenv(ansible.PAYLOAD_CACHE_SWITCH, "1")
    environment = ansible.payload_cache_environment(CHECKOUT_CONTROLLER)
    enabled = environment["ANSIBLE_CALLBACKS_ENABLED"].split(",")
    assert enabled == ["hostcheck_payload_cache", "hostcheck_jinja_plugins"]
    folder = Path(environment["HOSTCHECK_TEST_PAYLOAD_CACHE"])
    assert folder == ansible.PAYLOAD_CACHES / ansible.payload_cache_key() and folder.is_dir()
    # a controller with the collection installed (tests/integration/collection.py) in a venv of
    # its own: the same ansible-core release, wherever its venv is, shares the folder; another
    # release has its own
    ours = ansible.core_release(CHECKOUT_CONTROLLER)
    for venv, text in (("same", ours.read_text()), ("older", "__version__ = '2.16.14'\n")):
        release = tmp_path / venv / "lib/python3.11/site-packages/ansible/release.py"
        release.parent.mkdir(parents=True)
        release.write_text(text)
    same = Controller(tmp_path / "same" / "bin", tmp_path, {})
    older = Controller(tmp_path / "older" / "bin", tmp_path, {})
    assert ansible.payload_cache_environment(same)["HOSTCHECK_TEST_PAYLOAD_CACHE"] == str(folder)
    other = Path(ansible.payload_cache_environment(older)["HOSTCHECK_TEST_PAYLOAD_CACHE"])
    assert other != folder and other.parent == ansible.PAYLOAD_CACHES
    assert other.name == ansible.payload_cache_key(CHECKOUT, ansible.core_release(older))
    shutil.rmtree(other)


def ping_twice(tmp_path: Path, environment: dict[str, str]) -> list[str]:
    """ansible.builtin.ping on this machine, two runs; the payload files of the cache after
    each, with their inode (a rebuilt payload is a new file renamed into place)."""
    playbook = tmp_path / "ping.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ping:\n")
    shared = Path(environment["HOSTCHECK_TEST_PAYLOAD_CACHE"])
    seen = []
    for _ in range(2):
        done = subprocess.run(
            [
                str(ANSIBLE_BIN / "ansible-playbook"),
                "-i",
                "localhost,",
                "-c",
                "local",
                str(playbook),
            ],
            capture_output=True,
            text=True,
            env=CHECKOUT_CONTROLLER.environment(
                ANSIBLE_STDOUT_CALLBACK="json",
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
                ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                **environment,
            ),
            cwd=CHECKOUT,
            check=False,
        )
        stats = json.loads(done.stdout[done.stdout.index("{") :])["stats"]["localhost"]
        assert done.returncode == 0 and stats["ok"] == 1, done.stderr
        seen.append(
            sorted(f"{p.name}:{p.stat().st_ino}" for p in shared.iterdir() if "ping" in p.name)
        )
    return seen


def test_a_second_run_takes_the_payload_the_first_built(tmp_path, monkeypatch):
    shared = tmp_path / "payloads"
    environment = {
        "ANSIBLE_CALLBACK_PLUGINS": str(ansible.SUITE_CALLBACK_PLUGINS),
        "ANSIBLE_CALLBACKS_ENABLED": "hostcheck_payload_cache",
        "HOSTCHECK_TEST_PAYLOAD_CACHE": str(shared),
    }
    first, second = ping_twice(tmp_path, environment)
    assert sorted(name.split(":")[0] for name in first) == [
        "ansible.modules.ping-ZIP_DEFLATED-none",
        "ansible.modules.ping-ZIP_DEFLATED-none.lock",
    ]
    assert second == first  # the same files: not built again
    assert not list((tmp_path / "tmp").iterdir())  # each run's own folder went, the cache stays
