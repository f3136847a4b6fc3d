"""The shm role's validate action: checks shm_size and shm_mount_options, reads /dev/shm once
and returns the plan (plugins/plugin_utils/shm_rules.py). Documented, with the values returned,
in plugins/modules/shm_validate.py."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.shm_rules import Validation


class ActionModule(Validation):
    pass
