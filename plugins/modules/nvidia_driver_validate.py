# The nvidia_driver role's validate action (plugins/action/nvidia_driver_validate.py); this file
# is its documentation.

DOCUMENTATION = r"""
module: nvidia_driver_validate
short_description: Check the nvidia_driver role's variables against this OS, read the host once
description:
  - Checks the variables against roles/nvidia_driver/meta/argument_specs.yml; when the role is
    enabled, the numeric ones against I(number_ranges), then the variables together and against
    this OS's package table (the first of the role's vars/<distribution>-<major>.yml,
    <distribution>.yml, <os_family>-<major>.yml, <os_family>.yml) with nvidia_driver_settings
    (plugins/plugin_utils/nvidia_driver_rules.py), and works out what this OS installs for them.
  - Then reads the host once (M(hostcheck.gpu_hosts.nvidia_driver_probe)) for the GPUs and
    NVSwitches, the installed and loaded driver, the holds, Secure Boot and I(nouveau_file).
  - Fails, before any role changes anything, on a bad value or a conflict (naming the
    variable) and on an OS without a package table or one the role refuses (end of life).
    A host without a GPU is noted, not failed (unless I(nvidia_driver_skip_without_gpu) is
    false, it gets no driver).
  - The role's validate.yml runs it; main.yml and verify.yml get the same result again in the
    run through I(validated), without reading the host again.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.nvidia_driver_variables
  - hostcheck.gpu_hosts.nvidia_driver_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.nvidia_driver_validate:
    nvidia_driver_enabled: "{{ nvidia_driver_enabled }}"
    nvidia_driver_skip_without_gpu: "{{ nvidia_driver_skip_without_gpu }}"
    # ... every other nvidia_driver_* variable the same way
    number_ranges: "{{ __nvidia_driver_number_ranges }}"
    nouveau_file: "{{ __nvidia_driver_nouveau_file }}"
    validated: "{{ __nvidia_driver_validation | default({}) }}"
  register: __nvidia_driver_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use (its vars/main.yml names them C(__nvidia_driver_wanted),
    C(__nvidia_driver_plan), C(__nvidia_driver_probe) and C(__nvidia_driver_os_vars)); empty
    when nvidia_driver_enabled is false.
  type: dict
  returned: success
  contains:
    wanted:
      description: The variables as nvidia_driver_settings normalised them (branch,
        source with auto resolved, modules, build, fabric_manager, mok_key, mok_cert and the
        switches).
      type: dict
    plan:
      description: What this OS installs for them (nvidia_driver_packages) - driver,
        pin, headers, fabric_manager and hold packages, the dnf module stream and the CUDA
        repository (name, url, key_url; null for Ubuntu's own packages).
      type: dict
    os:
      description: This OS as the rules see it (name, package table, headers, repository
        URLs, why it is refused).
      type: dict
    os_vars:
      description: This OS's vars file, its C({fact}) fields filled in (C({kernel}) too) and
        C(__nvidia_driver_cuda_repo_os) without dots (C(ubuntu2204)); the tasks use its package
        manager, CUDA repository name, Fabric Manager version spec, initramfs command and dnf
        versionlock package.
      type: dict
    probe:
      description: What M(hostcheck.gpu_hosts.nvidia_driver_probe) read before any change.
      type: dict
    install:
      description: Whether main.yml installs the driver here - a GPU is on the PCI bus, or
        I(nvidia_driver_skip_without_gpu) is false.
      type: bool
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
"""
