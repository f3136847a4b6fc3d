"""Verifies the NVIDIA driver after provisioning, in one task and at most one read of the host
(hostcheck.gpu_hosts.nvidia_driver_probe, which reads the nouveau blacklist too): only the
wanted branch installed, a module built for the running kernel, the packages held (apt), nouveau
blacklisted, Fabric Manager at the driver's version where it belongs, and no reboot pending when
nvidia_driver_fail_if_reboot_required says so.

    - hostcheck.gpu_hosts.nvidia_driver_verify:   # the arguments of nvidia_driver_validate

The validation comes first (plugins/action/nvidia_driver_validate.py; reused when the run
validated already); a host it found without a GPU, which the role skipped, is not read again.
Documented in plugins/modules/nvidia_driver_verify.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.action.nvidia_driver_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    nvidia_driver_fabric_manager,
    nvidia_driver_installed_branches,
    nvidia_driver_reboot,
    nvidia_driver_version_mismatches,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


def driver_problems(probe: dict, values: dict, checks: dict) -> list[str]:
    """What differs from the validated values, one line each. checks: hold, blacklist_nouveau
    (the variables' booleans) and nouveau_file."""
    wanted, plan = values["wanted"], values["plan"]
    problems = []
    branches = list(nvidia_driver_installed_branches(probe))
    if branches != [wanted["branch"]]:
        problems.append(
            f"installed branches {', '.join(branches) or 'none'}, wanted only {wanted['branch']}"
        )
    if probe["built_version"] is None:
        problems.append(
            f"no nvidia module for the running kernel {probe['kernel']} (modinfo): the DKMS "
            "build failed or the headers are missing; see dkms status"
        )
    if values["os_vars"]["__nvidia_driver_package_manager"] == "apt" and checks["hold"]:
        unheld = [
            name for name in plan["hold"] if name in probe["packages"] and name not in probe["held"]
        ]
        if unheld:
            problems.append(f"not held: {', '.join(unheld)}")
    if checks["blacklist_nouveau"] and not probe["nouveau_blacklisted"]:
        problems.append(f"{checks['nouveau_file']} does not blacklist nouveau")
    if nvidia_driver_fabric_manager(probe, wanted):
        mismatches = nvidia_driver_version_mismatches(probe, plan["fabric_manager"])
        if mismatches:
            problems.append(f"Fabric Manager not at the driver version: {', '.join(mismatches)}")
    reboot = nvidia_driver_reboot(probe, wanted, True)
    if reboot["needed"] and wanted["fail_if_reboot_required"]:
        problems.append(reboot["message"])
    return problems


def driver_verified(probe: dict, values: dict, checks: dict) -> str:
    """What holds, or Invalid naming every problem."""
    problems = driver_problems(probe, values, checks)
    if problems:
        raise Invalid(" | ".join(problems))
    return (
        f"driver {probe['driver_version']} (branch {values['wanted']['branch']}), module for "
        f"{probe['kernel']}: {probe['built_version']}, loaded: "
        f"{probe['loaded_version'] or 'nothing'}"
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
