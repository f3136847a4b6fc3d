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
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Compare with shm_size
  hostcheck.gpu_hosts.shm_verify:
    shm_enabled: "{{ shm_enabled }}"
    shm_size: "{{ shm_size }}"
    # ... every other shm_* variable the same way
    validated: "{{ __shm_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (C(/dev/shm is N bytes, as fstab says)), or every difference.
  type: str
  returned: always
"""
