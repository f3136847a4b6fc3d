"""The shm role's verification: fails where shm_validate would change something, naming each
difference with what fstab and the mount hold (plugins/plugin_utils/shm_rules.py). Documented
in plugins/modules/shm_verify.py."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.shm_rules import (
    PROBE,
    Validation,
    shm_verified,
)


class ActionModule(Validation):
    VERIFIES = True

    def verify(self, values: dict) -> list[str]:
        probe = self.probed or self.on_host(PROBE, {})
        return [
            shm_verified(
                probe, self.arg("shm_size"), values["option"], self.arg("shm_mount_options")
            )
        ]
