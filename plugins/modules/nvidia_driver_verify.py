# The nvidia_driver role's verify action (plugins/action/nvidia_driver_verify.py); this file is
# its documentation.

DOCUMENTATION = r"""
module: nvidia_driver_verify
short_description: Prove that the NVIDIA driver is installed, held and loadable, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.nvidia_driver_validate) does (or takes its result from
    I(validated)), then reads the host at most once (M(hostcheck.gpu_hosts.nvidia_driver_probe),
    I(nouveau_file) too).
  - Checks that only the wanted branch is installed, a module is built for the running kernel,
    the packages are held (apt, with I(nvidia_driver_hold)), nouveau is blacklisted (with
    I(nvidia_driver_blacklist_nouveau)), Fabric Manager is at the driver's version where it
    belongs, and no reboot is pending when I(nvidia_driver_fail_if_reboot_required) says so.
  - Says what holds, or fails naming every problem; a host the role skipped (no GPU) is not
    read again.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.nvidia_driver_variables
  - hostcheck.gpu_hosts.nvidia_driver_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify the installed driver, its holds, nouveau and Fabric Manager (changes nothing)
  hostcheck.gpu_hosts.nvidia_driver_verify:
    nvidia_driver_enabled: "{{ nvidia_driver_enabled }}"
    nvidia_driver_skip_without_gpu: "{{ nvidia_driver_skip_without_gpu }}"
    # ... every other nvidia_driver_* variable the same way
    number_ranges: "{{ __nvidia_driver_number_ranges }}"
    nouveau_file: "{{ __nvidia_driver_nouveau_file }}"
    validated: "{{ __nvidia_driver_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (the driver version and branch, the module built for the running
    kernel, the loaded one), or every problem.
  type: str
  returned: always
"""
