# The dataset_staging role's validate action (plugins/action/dataset_staging_validate.py); this
# file is its documentation.

DOCUMENTATION = r"""
module: dataset_staging_validate
short_description: Check the dataset_staging role's variables, disks and sources, change nothing
description:
  - Checks the variables against roles/dataset_staging/meta/argument_specs.yml, the numeric ones
    against I(number_ranges), and all of them together
    (plugins/plugin_utils/dataset_staging_rules.py); loads the role's per-OS vars and refuses an
    OS that has none.
  - When the role is enabled, reads without changing anything, in a C(--check) run too, the
    disks of I(dataset_staging_devices) (M(hostcheck.gpu_hosts.dataset_disk_probe)), each
    dataset's source (M(hostcheck.gpu_hosts.dataset_stage) in mode C(measure), on the node or,
    for a dataset from the controller, on the controller), and the size of the file system of
    I(dataset_staging_hot_root) when a dataset is hot.
  - Fails, before any role changes anything, on a bad value (naming the variable), on a disk
    that holds data (unless I(dataset_staging_force_format)), is mounted, swap or in an array,
    on a source that cannot be read, and on a hot copy larger than its tmpfs.
  - The role's validate.yml runs it; main.yml and verify.yml get the same result again in the
    run through I(validated), without reading the host again.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.dataset_staging_variables
  - hostcheck.gpu_hosts.dataset_staging_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.dataset_staging_validate:
    dataset_staging_enabled: "{{ dataset_staging_enabled }}"
    dataset_staging_devices: "{{ dataset_staging_devices }}"
    # ... every other dataset_staging_* variable the same way
    number_ranges: "{{ __dataset_staging_number_ranges }}"
    validated: "{{ __dataset_staging_validation | default({}) }}"
  register: __dataset_staging_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use (vars/main.yml names them); empty when
    I(dataset_staging_enabled) is false.
  type: dict
  returned: success
  contains:
    settings:
      description: The variables checked together and normalised (C(__dataset_staging)),
        with the layout (none, single, md, btrfs), the state folders and each dataset's
        name, variable, source, side, manifest, hot, dest and hot_dest.
      type: dict
    os_vars:
      description: The role's per-OS vars (vars/<os_family>.yml), the packages, mdadm.conf
        and the initramfs command.
      type: dict
    probe:
      description: What M(hostcheck.gpu_hosts.dataset_disk_probe) read
        (C(__dataset_staging_probe)); a skipped result when no disk is given.
      type: dict
    disk:
      description: The disk plan (C(__dataset_staging_disk)), action (none, reuse, format,
        create), target, refusals and the devices to wipe.
      type: dict
    measured:
      description: Each dataset's M(hostcheck.gpu_hosts.dataset_stage) C(measure) result, node
        ones first, with the dataset under C(__dataset_staging_item).
      type: list
      elements: dict
    hot_fs:
      description: The size (bytes) and mount point (target) of the file system hot copies go
        to.
      type: dict
      returned: when a dataset is hot
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
"""
