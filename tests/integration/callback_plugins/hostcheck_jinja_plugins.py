"""A callback of the test suite, not of the collection (tests/integration/ansible.py enables it
beside hostcheck_payload_cache).

Ansible forks a worker per task and host, and each worker loads ansible-core's Jinja2 filter and
test plugins again on the first filter or test it templates (a `when` with `| bool` is enough):
about a sixth of a no-op site.yml's controller CPU (docs/provisioning.md). This callback loads
them in the controller when Ansible loads its callbacks, before the first task, so the workers
inherit them. They are the same plugins, loaded earlier; nothing else changes. (In the
collection a strategy plugin did this and was taken back: callbacks such as ansible.posix.json
treat any strategy but linear and debug as free.)"""

from __future__ import annotations

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "hostcheck_jinja_plugins"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # a lookup of one builtin name loads every builtin plugin of its kind
        filter_loader.get("bool")
        test_loader.get("match")
