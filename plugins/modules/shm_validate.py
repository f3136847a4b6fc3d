# The shm role's validate action (plugins/action/shm_validate.py); this file is its documentation.

DOCUMENTATION = r"""
module: shm_validate
short_description: Check the shm role's variables and what /dev/shm needs, change nothing
description:
  - Checks the variables against roles/shm/meta/argument_specs.yml, then reads /dev/shm once
    (M(hostcheck.gpu_hosts.shm_probe)) and works out whether its fstab line and the mount hold
    I(shm_size) and I(shm_mount_options).
  - Fails, before any role changes anything, on a bad value (naming the variable), on an OS the
    role does not support, and on a size below what /dev/shm holds now
    (unless I(shm_refuse_shrink_below_used) is false).
  - The role's validate.yml runs it; main.yml and verify.yml get the same result again in the
    run through I(validated), without reading the host again.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.shm_variables
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.shm_validate:
    shm_enabled: "{{ shm_enabled }}"
    shm_size: "{{ shm_size }}"
    # ... every other shm_* variable the same way
    validated: "{{ __shm_validation | default({}) }}"
  register: __shm_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use.
  type: dict
  returned: success
  contains:
    option:
      description: What tmpfs takes after size=, C(N%) or bytes.
      type: str
    changes:
      description: What is out of line, C(fstab) and C(live); empty when nothing must change.
      type: list
      elements: str
      returned: when shm_enabled
    bytes:
      description: The size the kernel gives /dev/shm with that option on this host's RAM.
      type: int
      returned: when shm_enabled
    fstab_line:
      description: The /dev/shm line to write to fstab; its options are those other roles
        wrote (noexec ...), then shm_mount_options, then size=.
      type: str
      returned: when shm_enabled
    source:
      description: The source to remount the live /dev/shm with.
      type: str
      returned: when shm_enabled
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
"""
