"""The shm role's verification: fails where shm_validate would change something, naming each
difference with what fstab and the mount hold. Documented in plugins/modules/shm_verify.py."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.action.shm_validate import (
    PROBE,
    shm_differences,
    wanted_bytes,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.shm_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


def shown_fstab(fstab: list[dict]) -> str:
    return f"{fstab[-1]['fstype']} {fstab[-1]['options']}" if fstab else "none -"


def shown_live(live: dict | None) -> str:
    if live is None:
        return "none 0 -"
    return f"{live['fstype']} {live['size']} {','.join(live['options'])}"


def shm_verified(probe: dict, size: object, option: str, mount_options: list[str]) -> str:
    """What holds, or Invalid naming every difference."""
    differences = shm_differences(probe, option, mount_options)
    if differences["fstab"] or differences["live"]:
        raise Invalid(
            f"/dev/shm does not match shm_size={size}: fstab has '{shown_fstab(probe['fstab'])}', "
            f"the mount has '{shown_live(probe['live'])}' "
            f"(wanted {wanted_bytes(option, probe)} bytes): "
            + "; ".join([*differences["fstab"], *differences["live"]])
        )
    return f"/dev/shm is {probe['live']['size']} bytes, as fstab says"


class ActionModule(Validation):
    VERIFIES = True

    def verify(self, values: dict) -> list[str]:
        probe = self.probed or self.on_host(PROBE, {})
        return [
            shm_verified(
                probe, self.arg("shm_size"), values["option"], self.arg("shm_mount_options")
            )
        ]
