# The ulimits role's variables as options of its validate and verify actions: generated
# from roles/ulimits/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  ulimits_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  ulimits_users:
    description: User names, @group names or '*' (which pam_limits never applies to root).
    type: list
    elements: str
    default:
    - '*'
    - root
  ulimits_nofile_soft:
    description: Open files, soft; a positive whole number or unlimited.
    type: raw
    default: 65536
  ulimits_nofile_hard:
    description: Open files, hard; at most fs.nr_open of the host.
    type: raw
    default: 1048576
  ulimits_memlock_soft:
    description: Locked memory, soft; KiB as in limits.conf, a size (K/M/G and KiB/MiB/GiB
      binary, KB/MB/GB decimal), or unlimited.
    type: raw
    default: unlimited
  ulimits_memlock_hard:
    description: Locked memory, hard; KiB as in limits.conf, a size (K/M/G and KiB/MiB/GiB
      binary, KB/MB/GB decimal), or unlimited.
    type: raw
    default: unlimited
  ulimits_nproc_soft:
    description: Processes per user, soft; a positive whole number or unlimited.
    type: raw
    default: 65536
  ulimits_nproc_hard:
    description: Processes per user, hard; a positive whole number or unlimited.
    type: raw
    default: unlimited
  ulimits_systemd_enabled:
    description: Also set DefaultLimit* for systemd services through a system.conf.d drop-in.
    type: bool
    default: true
  ulimits_pam_services:
    description: Login services whose PAM session stack must run pam_limits.so.
    type: list
    elements: str
    default:
    - sshd
    - login
    - su-l
    - runuser-l
"""
