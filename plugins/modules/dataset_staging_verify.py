# The dataset_staging role's verify action (plugins/action/dataset_staging_verify.py); this file
# is its documentation.

DOCUMENTATION = r"""
module: dataset_staging_verify
short_description: Prove the staging file system and the staged datasets, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.dataset_staging_validate) does (or takes its result from
    I(validated)).
  - With disks, reads the mount at I(dataset_staging_mount) and its fstab line (C(findmnt)) and
    fails unless it holds I(dataset_staging_filesystem), mounted by UUID with
    I(dataset_staging_mount_options) and listed in fstab.
  - Asks M(hostcheck.gpu_hosts.dataset_stage) with I(dry_run) whether each dataset, and its hot
    copy, is complete at its destination against the manifest the staging recorded; nothing is
    written, in a C(--check) run or not.
  - Says what holds, or fails naming every problem; reads nothing where there is no disk and no
    dataset.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.dataset_staging_variables
  - hostcheck.gpu_hosts.dataset_staging_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify the staging file system and the staged datasets (changes nothing)
  hostcheck.gpu_hosts.dataset_staging_verify:
    dataset_staging_enabled: "{{ dataset_staging_enabled }}"
    dataset_staging_devices: "{{ dataset_staging_devices }}"
    # ... every other dataset_staging_* variable the same way
    number_ranges: "{{ __dataset_staging_number_ranges }}"
    validated: "{{ __dataset_staging_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (the mount by UUID as fstab says, each copy's files complete), or
    every problem.
  type: str
  returned: always
"""
