# The sysctl_tuning role's own constants (its vars/main.yml) as options of its actions:
# the INTERNAL spec of the Validation in plugins/plugin_utils/sysctl_tuning_rules.py.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  number_ranges:
    description: The range of each numeric variable, C([lowest, highest, unit])
      (C(__sysctl_tuning_number_ranges) of the role's vars/main.yml).
    type: dict
    required: true
  unit_dir:
    description: Where the role writes its systemd units (C(__sysctl_tuning_unit_dir) of its
      vars/main.yml).
    type: path
    required: true
  governor_unit:
    description: The unit that sets the governor at boot (C(__sysctl_tuning_governor_unit)).
    type: str
    required: true
  thp_unit:
    description: The unit that sets the THP modes at boot (C(__sysctl_tuning_thp_unit)).
    type: str
    required: true
  tuned_profile:
    description: The role's tuned profile, RHEL family (C(__sysctl_tuning_tuned_profile)).
    type: str
    required: true
  thp_dir:
    description: The kernel's transparent huge page folder (C(__sysctl_tuning_thp_dir)).
    type: path
    required: true
  controller_boot_id:
    description: The controller's /proc/sys/kernel/random/boot_id, empty when unknown
      (C(__sysctl_tuning_controller_boot_id), a lookup on the controller); a host with the
      same boot_id in other namespaces shares the controller's kernel.
    type: str
    required: true
  controller_namespaces:
    description: The controller's C(pid:[N] mnt:[N]) (C(__sysctl_tuning_controller_namespaces)).
    type: str
    required: true
  managed:
    description: The C(ansible_managed) line the role's templates start with, as the template
      module fills it in (C(__sysctl_tuning_managed)).
    type: str
    required: true
"""
