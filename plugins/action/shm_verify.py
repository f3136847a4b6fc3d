"""Verifies /dev/shm after provisioning, in one task and one read of the host (shm_probe): the
fstab line is a tmpfs with size=, the mount is a tmpfs of the size shm_size gives on this RAM,
with shm_mount_options.

    - hostcheck.gpu_hosts.shm_verify:

The validation comes first (plugins/action/shm_validate.py; reused when the run validated
already). The rest is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.action.shm_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.shm_validate import wanted_bytes
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import Invalid


def shown_fstab(fstab: list[dict]) -> str:
    return f"{fstab[-1]['fstype']} {fstab[-1]['options']}" if fstab else "none -"


def shown_live(live: dict | None) -> str:
    if live is None:
        return "none 0 -"
    return f"{live['fstype']} {live['size']} {','.join(live['options'])}"


def shm_mismatches(probe: dict, option: str, wanted: int, mount_options: list[str]) -> list[str]:
    """What differs from shm_size and shm_mount_options, one line each."""
    fstab, live = probe["fstab"], probe["live"]
    found = []
    if not fstab or fstab[-1]["fstype"] != "tmpfs":
        found.append("fstab has no tmpfs line for /dev/shm")
    elif f"size={option}" not in fstab[-1]["options"].split(","):
        found.append(f"the fstab line lacks size={option}")
    if live is None or live["fstype"] != "tmpfs":
        found.append("no tmpfs is mounted at /dev/shm")
    else:
        if live["size"] != wanted:
            found.append(f"the mount is {live['size']} bytes")
        missing = [o for o in mount_options if o not in live["options"]]
        if missing:
            found.append(f"the mount lacks {','.join(missing)}")
    return found


def shm_verified(probe: dict, size: object, option: str, mount_options: list[str]) -> str:
    """What holds, or Invalid naming every mismatch."""
    wanted = wanted_bytes(size, probe)
    mismatches = shm_mismatches(probe, option, wanted, mount_options)
    if mismatches:
        raise Invalid(
            f"/dev/shm does not match shm_size={size}: fstab has '{shown_fstab(probe['fstab'])}', "
            f"the mount has '{shown_live(probe['live'])}' (wanted {wanted} bytes): "
            + "; ".join(mismatches)
        )
    return f"/dev/shm is {probe['live']['size']} bytes, as fstab says"


class ActionModule(Validation):
    VERIFIES = True

    def verify(self, values: dict) -> list[str]:
        probe = self.probed or self.read_shm()
        return [
            shm_verified(
                probe, self.var("shm_size"), values["option"], self.var("shm_mount_options")
            )
        ]
