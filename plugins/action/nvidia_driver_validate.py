"""Validates the nvidia_driver role's variables together and against the host's OS.

    - hostcheck.gpu_hosts.nvidia_driver_validate:
      register: __nvidia_driver_validation

Checks, in this order: nvidia_driver_enabled is a boolean; (enabled) the numeric variables
against their ranges (__nvidia_driver_number_ranges, vars/main.yml); (enabled) the variables
together and against this OS's package table (vars/<OS>.yml, the first of Distribution-Major,
Distribution, OsFamily-Major, OsFamily), with the nvidia_driver_settings filter; then the host
is read once (hostcheck.gpu_hosts.nvidia_driver_probe). values (empty when the role is switched
off):

    wanted   the variables as nvidia_driver_settings normalised them (__nvidia_driver_wanted)
    plan     packages, module stream, repository for this OS (__nvidia_driver_plan)
    os       this OS as the filters see it
    os_vars  the per-OS variables, templated (vars/main.yml aliases the ones the tasks use)
    probe    what the probe read: GPUs, packages, modules, Secure Boot (__nvidia_driver_probe)
    install  whether main.yml installs the driver here: a GPU is on the PCI bus, or
             nvidia_driver_skip_without_gpu is false (a host without one is noted, not failed)

The rest is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.template import trust_as_template
from ansible_collections.hostcheck.gpu_hosts.plugins.filter.numbers import numbers_in_range
from ansible_collections.hostcheck.gpu_hosts.plugins.filter.nvidia_driver import (
    nvidia_driver_packages,
    nvidia_driver_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    RoleValidation,
)

# vars/<candidate>.yml, the first that exists.
OS_VARS = [
    "{distribution}-{distribution_major_version}",
    "{distribution}",
    "{os_family}-{distribution_major_version}",
    "{os_family}",
]
# The nvidia_driver_settings filter's keys and the variables they come from.
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


def check_numbers(variables: dict, ranges: dict) -> dict:
    """The numeric variables as integers, each in its range (else the variable is named)."""
    return numbers_in_range({name: variables.get(name) for name in ranges}, ranges)


def nvidia_driver_os(os_vars: dict, facts: dict, repo_url: object, repo_key_url: object) -> dict:
    """This OS as the nvidia_driver filters see it, from the (templated) per-OS variables and
    nvidia_driver_cuda_repo_url / nvidia_driver_cuda_repo_key_url ("" or none: NVIDIA's)."""
    arch = facts.get("architecture")
    repository = str(
        repo_url
        or f"{CUDA_REPOS}{os_vars['__nvidia_driver_cuda_repo_os']}/{CUDA_ARCHES.get(arch, arch)}"
    ).strip()
    key_url = repo_key_url or f"{repository}/{os_vars['__nvidia_driver_cuda_repo_key_file']}"
    return {
        "name": f"{facts.get('distribution')} {facts.get('distribution_version')}",
        "unsupported": os_vars.get("__nvidia_driver_unsupported") or "",
        "default_source": os_vars["__nvidia_driver_default_source"],
        "table": os_vars["__nvidia_driver_table"],
        "headers": os_vars["__nvidia_driver_headers"],
        "repository_url": repository,
        "repository_key_url": key_url,
    }


def nvidia_driver_values(variables: dict, os_vars: dict, facts: dict) -> dict:
    """The variables checked together and against this OS: wanted, plan, os, os_vars."""
    os = nvidia_driver_os(
        os_vars,
        facts,
        variables.get("nvidia_driver_cuda_repo_url"),
        variables.get("nvidia_driver_cuda_repo_key_url"),
    )
    wanted = nvidia_driver_settings({key: variables.get(name) for key, name in GIVEN.items()}, os)
    plan = nvidia_driver_packages(os, wanted, facts["kernel"])
    return {"wanted": wanted, "plan": plan, "os": os, "os_vars": os_vars}


def _trusted(data):
    if isinstance(data, str):
        return trust_as_template(data)
    if isinstance(data, dict):
        return {key: _trusted(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_trusted(value) for value in data]
    return data


def installs_here(probe: dict, skip_without_gpu: bool) -> bool:
    return bool(probe["gpus"]) or not skip_without_gpu


class ActionModule(RoleValidation):
    SWITCHED_OFF = "the NVIDIA driver is left as it is"
    # what read_driver_state() read in this task (the verify action compares it when it
    # validated now)
    probed: dict | None = None

    def validate(self) -> dict:
        if not self.var("nvidia_driver_enabled"):
            return {}
        ranges = self.var("__nvidia_driver_number_ranges")
        check_numbers({name: self.var(name) for name in ranges}, ranges)
        facts = self.facts()
        loaded = self.os_vars(OS_VARS, required=True)
        # vars/<OS>.yml name facts in templates ("debian{{ ansible_facts[...] }}")
        templar = self._templar.copy_with_new_env(
            available_variables={**self._vars, "ansible_facts": facts}
        )
        os_vars = templar.template(_trusted(loaded))
        variables = {
            name: self.var(name)
            for name in [
                *GIVEN.values(),
                "nvidia_driver_cuda_repo_url",
                "nvidia_driver_cuda_repo_key_url",
            ]
        }
        values = nvidia_driver_values(variables, os_vars, facts)
        values["probe"] = self.read_driver_state(values["wanted"])
        values["install"] = installs_here(
            values["probe"], boolean(self.var("nvidia_driver_skip_without_gpu"))
        )
        if not values["install"]:
            self.note(
                f"{self._vars.get('inventory_hostname')}: no NVIDIA GPU on the PCI bus (no vendor "
                "0x10de display controller in /sys/bus/pci/devices): the NVIDIA driver is not "
                "installed here (nvidia_driver_skip_without_gpu: false installs it anyway)"
            )
        return values

    def read_driver_state(self, wanted: dict) -> dict:
        args = {
            "mok_key": wanted["mok_key"],
            "mok_cert": wanted["mok_cert"],
            "nouveau_file": self.value("__nvidia_driver_nouveau_file"),
        }
        read = self.on_host(PROBE, args)
        self.probed = {key: value for key, value in read.items() if not key.startswith("_ansible")}
        return self.probed
