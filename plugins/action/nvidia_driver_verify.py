"""Verifies the NVIDIA driver after provisioning, in one task and at most one read of the host
(hostcheck.gpu_hosts.nvidia_driver_probe, which reads the nouveau blacklist too): only the
wanted branch installed, a module built for the running kernel, the packages held (apt), nouveau
blacklisted, Fabric Manager at the driver's version where it belongs, and no reboot pending when
nvidia_driver_fail_if_reboot_required says so.

    - hostcheck.gpu_hosts.nvidia_driver_verify:   # the arguments of nvidia_driver_validate

The validation comes first (the Validation of plugins/plugin_utils/nvidia_driver_rules.py;
reused when the run validated already); a host it found without a GPU, which the role skipped,
is not read again.
Documented in plugins/modules/nvidia_driver_verify.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    Validation,
    driver_verified,
)


class ActionModule(Validation):
    VERIFIES = True

    def verify(self, values: dict) -> list[str]:
        if not values["install"]:
            return [
                f"{self.host}: no NVIDIA GPU on the PCI bus and nvidia_driver_skip_without_gpu: "
                "nothing installed, nothing to verify"
            ]
        checks = {
            "hold": self.arg("nvidia_driver_hold"),
            "blacklist_nouveau": self.arg("nvidia_driver_blacklist_nouveau"),
            "nouveau_file": self.arg("nouveau_file"),
        }
        probe = self.probed or self.read_driver_state(values["wanted"])
        return [driver_verified(probe, values, checks)]
