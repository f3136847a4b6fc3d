# The shm role's variables as options of its validate and verify actions: generated
# from roles/shm/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  shm_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  shm_size:
    description: Bytes, a size (K/M/G and KiB/MiB/GiB binary, KB/MB/GB decimal), or a whole
      percentage of RAM.
    type: raw
    default: 50%
  shm_mount_options:
    description: Options kept besides size=.
    type: list
    elements: str
    default:
    - nosuid
    - nodev
  shm_refuse_shrink_below_used:
    description: Refuse a size below what /dev/shm holds now.
    type: bool
    default: true
"""
