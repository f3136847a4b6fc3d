"""The nvidia_driver role's decisions: its variables checked together and against this OS's
package table, then the host read once (hostcheck.gpu_hosts.nvidia_driver_probe).

    - hostcheck.gpu_hosts.nvidia_driver_validate:
        nvidia_driver_branch: "{{ nvidia_driver_branch }}"   # ... every nvidia_driver_* variable
        number_ranges: "{{ __nvidia_driver_number_ranges }}"
        nouveau_file: "{{ __nvidia_driver_nouveau_file }}"
        validated: "{{ __nvidia_driver_validation | default({}) }}"
      register: __nvidia_driver_validation

Checks, in this order (when nvidia_driver_enabled): the numeric variables against their ranges
(number_ranges; the base checks them before validate()); the variables together and against
this OS's package table (os_vars(): the first of vars/<distribution>-<major>.yml,
<distribution>.yml, <os_family>-<major>.yml, <os_family>.yml), with nvidia_driver_settings
(plugins/plugin_utils/nvidia_driver_rules.py). The values returned, which the role's
vars/main.yml names __nvidia_driver_<value>, are documented in
plugins/modules/nvidia_driver_validate.py. The base is plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    nvidia_driver_packages,
    nvidia_driver_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import RoleAction

# nvidia_driver_settings' keys and the variables they come from.
GIVEN = {
    "branch": "nvidia_driver_branch",
    "source": "nvidia_driver_source",
    "modules": "nvidia_driver_kernel_modules",
    "build": "nvidia_driver_module_build",
    "fabric_manager": "nvidia_driver_fabric_manager",
    "mok_key": "nvidia_driver_mok_key",
    "mok_cert": "nvidia_driver_mok_cert",
    "allow_branch_change": "nvidia_driver_allow_branch_change",
    "modules_signed": "nvidia_driver_modules_signed",
    "reboot_ok": "nvidia_driver_reboot_ok",
    "fail_if_reboot_required": "nvidia_driver_fail_if_reboot_required",
    "packages": "nvidia_driver_packages",
}
CUDA_REPOS = "https://developer.download.nvidia.com/compute/cuda/repos/"
# NVIDIA's repository names the architecture its own way (arm64 servers: sbsa).
CUDA_ARCHES = {"x86_64": "x86_64", "aarch64": "sbsa"}
PROBE = "hostcheck.gpu_hosts.nvidia_driver_probe"


def cuda_repo_os(os_vars: dict) -> str:
    """NVIDIA's name of this OS in its CUDA repository: vars/<OS>.yml's
    __nvidia_driver_cuda_repo_os (its {fact} fields filled in) without dots, as ubuntu2204 for
    ubuntu{distribution_version}."""
    return os_vars["__nvidia_driver_cuda_repo_os"].replace(".", "")


def nvidia_driver_os(os_vars: dict, facts: dict, repo_url: object, repo_key_url: object) -> dict:
    """This OS as nvidia_driver_rules sees it, from the per-OS variables ({fact} fields
    filled in) and nvidia_driver_cuda_repo_url / nvidia_driver_cuda_repo_key_url ("" or none:
    NVIDIA's)."""
    arch = facts.get("architecture")
    repository = str(
        repo_url or f"{CUDA_REPOS}{cuda_repo_os(os_vars)}/{CUDA_ARCHES.get(arch, arch)}"
    ).strip()
    key_url = repo_key_url or f"{repository}/{os_vars['__nvidia_driver_cuda_repo_key_file']}"
    return {
        "name": f"{facts.get('distribution')} {facts.get('distribution_version')}",
        "default_source": os_vars["__nvidia_driver_default_source"],
        "table": os_vars["__nvidia_driver_table"],
        "headers": os_vars["__nvidia_driver_headers"],
        "repository_url": repository,
        "repository_key_url": key_url,
    }


def nvidia_driver_values(variables: dict, os_vars: dict, facts: dict) -> dict:
    """The variables checked together and against this OS: wanted, plan, os, os_vars."""
    os_vars = {**os_vars, "__nvidia_driver_cuda_repo_os": cuda_repo_os(os_vars)}
    os = nvidia_driver_os(
        os_vars,
        facts,
        variables.get("nvidia_driver_cuda_repo_url"),
        variables.get("nvidia_driver_cuda_repo_key_url"),
    )
    wanted = nvidia_driver_settings({key: variables.get(name) for key, name in GIVEN.items()}, os)
    plan = nvidia_driver_packages(os, wanted, facts["kernel"])
    return {"wanted": wanted, "plan": plan, "os": os, "os_vars": os_vars}


def installs_here(probe: dict, skip_without_gpu: bool) -> bool:
    return bool(probe["gpus"]) or not skip_without_gpu


class ActionModule(RoleAction):
    ROLE = "nvidia_driver"
    INTERNAL: ClassVar[dict] = {
        "number_ranges": {"type": "dict", "required": True},
        "nouveau_file": {"type": "path", "required": True},
    }
    SWITCHED_OFF = "the NVIDIA driver is left as it is"
    CHECKS_WHEN_OFF = False
    # what read_driver_state() read in this task (the verify action compares it when it
    # validated now)
    probed: dict | None = None

    def validate(self) -> dict:
        variables = {
            name: self.arg(name)
            for name in [
                *GIVEN.values(),
                "nvidia_driver_cuda_repo_url",
                "nvidia_driver_cuda_repo_key_url",
            ]
        }
        values = nvidia_driver_values(variables, self.os_vars(required=True), self.facts())
        values["probe"] = self.read_driver_state(values["wanted"])
        values["install"] = installs_here(
            values["probe"], self.arg("nvidia_driver_skip_without_gpu")
        )
        if not values["install"]:
            self.note(
                f"{self.host}: no NVIDIA GPU on the PCI bus (no vendor 0x10de display controller "
                "in /sys/bus/pci/devices): the NVIDIA driver is not installed here "
                "(nvidia_driver_skip_without_gpu: false installs it anyway)"
            )
        return values

    def read_driver_state(self, wanted: dict) -> dict:
        args = {
            "mok_key": wanted["mok_key"],
            "mok_cert": wanted["mok_cert"],
            "nouveau_file": self.arg("nouveau_file"),
        }
        read = self.on_host(PROBE, args)
        self.probed = {key: value for key, value in read.items() if not key.startswith("_ansible")}
        return self.probed
