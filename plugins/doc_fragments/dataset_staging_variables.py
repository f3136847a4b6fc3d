# The dataset_staging role's variables as options of its validate and verify actions: generated
# from roles/dataset_staging/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  dataset_staging_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  dataset_staging_devices:
    description: /dev/disk/by-id paths or patterns of the disks to use; empty touches no disk.
    type: list
    elements: str
    default: []
  dataset_staging_filesystem:
    description: File system made on a blank disk or array.
    type: str
    default: xfs
    choices:
    - xfs
    - ext4
    - btrfs
  dataset_staging_mount:
    description: Absolute mount point of the staging file system.
    type: str
    default: /data
  dataset_staging_mount_options:
    description: Mount options.
    type: list
    elements: str
    default:
    - noatime
    - nofail
  dataset_staging_label:
    description: File system label.
    type: str
    default: data
  dataset_staging_force_format:
    description: Erase disks holding a file system, RAID signature or partition table.
    type: bool
    default: false
  dataset_staging_raid_name:
    description: Name of the md RAID 0 array made of several disks.
    type: str
    default: data
  dataset_staging_raid_chunk:
    description: Chunk size of the RAID 0 array.
    type: str
    default: 512K
  dataset_staging_datasets:
    description: Datasets to stage.
    type: list
    elements: dict
    default: []
  dataset_staging_parallel:
    description: Files copied at once.
    type: int
    default: 4
  dataset_staging_checksum:
    description: Checksum of every file.
    type: str
    default: sha256
    choices:
    - sha256
    - sha512
    - sha1
    - md5
    - blake2b
  dataset_staging_verify:
    description: Which files already at the destination are hashed again.
    type: str
    default: changed
    choices:
    - changed
    - all
  dataset_staging_verify_written:
    description: Hash each written file again from disk before renaming it.
    type: bool
    default: true
  dataset_staging_hot_root:
    description: Where hot copies go.
    type: str
    default: /dev/shm/datasets
  dataset_staging_package_lock_timeout:
    description: Seconds to wait, before installing packages, for another process (apt-daily,
      unattended-upgrades, dnf-makecache) to release the package manager's locks; then the
      play fails naming the holder.
    type: int
    default: 600
"""
