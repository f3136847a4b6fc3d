"""The nvidia_driver role's filters, for its tasks' YAML; the decisions its actions take too are
in plugins/plugin_utils/nvidia_driver_rules.py.

{{ probe | nvidia_driver_refusals(settings, plan) }}  why installing now would be wrong
    (branch drift, Secure Boot without signed modules), one message each, before any change
{{ probe | nvidia_driver_reboot(settings, local) }}  {needed, reboot, why, message}
{{ probe | nvidia_driver_fabric_manager(settings) }}  true where Fabric Manager belongs
{{ names | nvidia_driver_versioned(spec, version) }}  exact-version package specs
{{ probe | nvidia_driver_version_mismatches(names) }}  names not at the driver's version
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    nvidia_driver_fabric_manager,
    nvidia_driver_installed_branches,
    nvidia_driver_reboot,
    nvidia_driver_version_mismatches,
)


def nvidia_driver_refusals(probe: dict, settings: dict, packages: dict) -> list[str]:
    """Why the role must not install now; empty when it may. Checked before any change."""
    refusals = []
    wanted = settings["branch"]
    others = {
        b: where for b, where in nvidia_driver_installed_branches(probe).items() if b != wanted
    }
    if others and not settings["allow_branch_change"]:
        found = "; ".join(f"{b}: {', '.join(where)}" for b, where in sorted(others.items()))
        refusals.append(
            f"nvidia_driver_branch: {wanted} is asked for, but this host has branch "
            f"{', '.join(sorted(others))} ({found}); the role never switches a branch silently: "
            "set nvidia_driver_branch to the installed one, or nvidia_driver_allow_branch_change: "
            "true to move this host (a reboot follows)"
        )
    if probe.get("secure_boot") == "enabled":
        signed = packages["signed"] or settings["modules_signed"]
        if not signed and not settings["mok_key"]:
            refusals.append(
                "Secure Boot is enabled (mokutil --sb-state) and the "
                f"{settings['modules']} {settings['build']} modules would be unsigned, so the "
                "kernel would refuse to load them: give nvidia_driver_mok_key and "
                "nvidia_driver_mok_cert (an enrolled MOK that DKMS signs with), choose modules "
                "signed by a trusted key (Ubuntu: nvidia_driver_source: distribution with "
                "nvidia_driver_module_build: precompiled), or set nvidia_driver_modules_signed: "
                "true if their key is enrolled"
            )
        elif settings["mok_key"] and probe.get("mok_enrolled") is False:
            refusals.append(
                f"nvidia_driver_mok_cert: {settings['mok_cert']} is not enrolled (mokutil "
                "--test-key): enroll it with mokutil --import and confirm at the next boot's "
                "console, then run the role again"
            )
    if probe.get("mok_missing"):
        refusals.append(
            f"nvidia_driver_mok_key/nvidia_driver_mok_cert: not found on the host: "
            f"{', '.join(probe['mok_missing'])}"
        )
    return refusals


def nvidia_driver_versioned(names: list[str], spec: str, version: str) -> list[str]:
    """Package specs of one exact version ('{name}={version}-*' for apt, '{name}-{version}' dnf)."""
    return [spec.format(name=name, version=version) for name in names]


class FilterModule:
    def filters(self):
        return {
            "nvidia_driver_refusals": nvidia_driver_refusals,
            "nvidia_driver_fabric_manager": nvidia_driver_fabric_manager,
            "nvidia_driver_reboot": nvidia_driver_reboot,
            "nvidia_driver_versioned": nvidia_driver_versioned,
            "nvidia_driver_version_mismatches": nvidia_driver_version_mismatches,
        }
