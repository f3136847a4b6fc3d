"""A callback of the test suite, not of the collection (tests/integration/ansible.py enables it
for the suite's controllers when the suite keeps a payload cache).

Ansible keeps the modules' payloads (AnsiballZ: a module and the module_utils it imports, in a
zip) in the run's own temporary folder, so every ansible-playbook run parsed the source of each
module and of every module_utils file it imports again: 20-27 % of the controller's CPU in a
run of the suite. This callback, loaded before any task, points that folder's ansiballz_cache
at a folder kept across runs, named by what the payloads are built from (ansible.py
payload_cache_folder). Ansible still builds each payload itself, once, under its own lock per
file, and writes it under a temporary name renamed into place; the payloads sent are the same."""

from __future__ import annotations

import os

from ansible import constants
from ansible.plugins.callback import CallbackBase

FOLDER_VARIABLE = "HOSTCHECK_TEST_PAYLOAD_CACHE"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "hostcheck_payload_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        shared = os.environ.get(FOLDER_VARIABLE)
        if not shared:
            return
        os.makedirs(shared, exist_ok=True)
        link = os.path.join(constants.DEFAULT_LOCAL_TMP, "ansiballz_cache")
        if not os.path.lexists(link):
            os.symlink(shared, link)
