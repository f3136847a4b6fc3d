# The sysctl_tuning role's verify action (plugins/action/sysctl_tuning_verify.py); this file is
# its documentation.

DOCUMENTATION = r"""
module: sysctl_tuning_verify
short_description: Prove the sysctl_tuning role's sysctls, governor and THP, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.sysctl_tuning_validate) does, reading the host once
    with M(hostcheck.gpu_hosts.sysctl_tuning_probe), then compares the role's sysctl.d file,
    that no file read after it at boot sets another value, and the live values where the role
    sets them; where the kernel is the host's own, the governor, THP and their boot units
    (Debian family) or tuned profile (RHEL family); on a shared kernel, that nothing of the
    role's touches it at boot.
  - Says what holds, and what it did not verify on this host and why; or fails naming every
    mismatch.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.sysctl_tuning_variables
  - hostcheck.gpu_hosts.sysctl_tuning_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify the kernel tunables, CPU governor and THP (changes nothing)
  hostcheck.gpu_hosts.sysctl_tuning_verify:
    sysctl_tuning_enabled: "{{ sysctl_tuning_enabled }}"
    sysctl_tuning_file: "{{ sysctl_tuning_file }}"
    # ... every other sysctl_tuning_* variable the same way
    unit_dir: "{{ __sysctl_tuning_unit_dir }}"
    governor_unit: "{{ __sysctl_tuning_governor_unit }}"
    thp_unit: "{{ __sysctl_tuning_thp_unit }}"
    tuned_profile: "{{ __sysctl_tuning_tuned_profile }}"
    thp_dir: "{{ __sysctl_tuning_thp_dir }}"
    controller_boot_id: "{{ __sysctl_tuning_controller_boot_id }}"
    controller_namespaces: "{{ __sysctl_tuning_controller_namespaces }}"
    managed: "{{ __sysctl_tuning_managed }}"
    validated: "{{ __sysctl_tuning_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (the sysctl.d file, the live values, governor, THP and their boot
    units or tuned profile) and what was not verified here, or every mismatch.
  type: str
  returned: always
"""
