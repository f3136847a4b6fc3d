# The shm role's verify action (plugins/action/shm_verify.py); this file is its documentation.

DOCUMENTATION = r"""
module: shm_verify
short_description: Prove that /dev/shm holds shm_size, in fstab and mounted, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.shm_validate) does (or takes its result from
    I(validated)), reads /dev/shm and fails where that module would change something, naming
    every difference with what fstab and the mount hold.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.shm_variables
options:
  validated:
    description: The registered result of M(hostcheck.gpu_hosts.shm_validate) from earlier in
      the run.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: It changes nothing, so a check run does the same.
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Compare with shm_size
  hostcheck.gpu_hosts.shm_verify:
    shm_enabled: "{{ shm_enabled }}"
    shm_size: "{{ shm_size }}"
    shm_mount_options: "{{ shm_mount_options }}"
    shm_refuse_shrink_below_used: "{{ shm_refuse_shrink_below_used }}"
    validated: "{{ __shm_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (C(/dev/shm is N bytes, as fstab says)), or every difference.
  type: str
  returned: always
"""
