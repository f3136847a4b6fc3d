# The sysctl_tuning role's variables as options of its validate and verify actions: generated
# from roles/sysctl_tuning/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  sysctl_tuning_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  sysctl_tuning_file:
    description: The one sysctl.d file the role owns.
    type: str
    default: /etc/sysctl.d/90-hostcheck-training.conf
  sysctl_tuning_settings:
    description: sysctl name (dotted) to value; null leaves a name out of the file.
    type: dict
  sysctl_tuning_cpu_governor:
    description: cpufreq governor of every CPU; null leaves it.
    type: raw
    default: performance
    choices:
    - performance
    - powersave
    - ondemand
    - conservative
    - schedutil
    - userspace
    - null
  sysctl_tuning_thp_enabled:
    description: /sys/kernel/mm/transparent_hugepage/enabled; null leaves it.
    type: raw
    default: madvise
    choices:
    - always
    - madvise
    - never
    - null
  sysctl_tuning_thp_defrag:
    description: /sys/kernel/mm/transparent_hugepage/defrag; null leaves it.
    type: raw
    default: madvise
    choices:
    - always
    - defer
    - defer+madvise
    - madvise
    - never
    - null
  sysctl_tuning_tuned_include:
    description: RHEL family, the tuned profile the role's profile includes ("" for none).
    type: str
    default: throughput-performance
  sysctl_tuning_package_lock_timeout:
    description: Seconds to wait, before installing packages, for another process (apt-daily,
      unattended-upgrades, dnf-makecache) to release the package manager's locks; then the
      play fails naming the holder.
    type: int
    default: 600
"""
