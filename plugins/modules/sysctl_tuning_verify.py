# The sysctl_tuning role's verify action (plugins/action/sysctl_tuning_verify.py); this file is
# its documentation.

DOCUMENTATION = r"""
module: sysctl_tuning_verify
short_description: Prove the sysctl_tuning role's sysctls, governor and THP, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.sysctl_tuning_validate) does, reading the host once
    with M(hostcheck.gpu_hosts.sysctl_tuning_probe), then compares the role's sysctl.d file,
    that no file read after it at boot sets another value, and the live values where the role
    sets them; where the kernel is the host's own, the governor, THP and their boot units
    (Debian family) or tuned profile (RHEL family); on a shared kernel, that nothing of the
    role's touches it at boot.
  - Says what holds, and what it did not verify on this host and why; or fails naming every
    mismatch.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.sysctl_tuning_variables
options:
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
  validated:
    description: The registered result of M(hostcheck.gpu_hosts.sysctl_tuning_validate) from
      earlier in the run, passed as every role passes it; not used, as this role reads the
      host afresh every time.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: It changes nothing, so a check run does the same.
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify the kernel tunables, CPU governor and THP (changes nothing)
  hostcheck.gpu_hosts.sysctl_tuning_verify:
    sysctl_tuning_enabled: "{{ sysctl_tuning_enabled }}"
    sysctl_tuning_file: "{{ sysctl_tuning_file }}"
    sysctl_tuning_settings: "{{ sysctl_tuning_settings }}"
    sysctl_tuning_cpu_governor: "{{ sysctl_tuning_cpu_governor }}"
    sysctl_tuning_thp_enabled: "{{ sysctl_tuning_thp_enabled }}"
    sysctl_tuning_thp_defrag: "{{ sysctl_tuning_thp_defrag }}"
    sysctl_tuning_tuned_include: "{{ sysctl_tuning_tuned_include }}"
    unit_dir: "{{ __sysctl_tuning_unit_dir }}"
    governor_unit: "{{ __sysctl_tuning_governor_unit }}"
    thp_unit: "{{ __sysctl_tuning_thp_unit }}"
    tuned_profile: "{{ __sysctl_tuning_tuned_profile }}"
    thp_dir: "{{ __sysctl_tuning_thp_dir }}"
    controller_boot_id: "{{ __sysctl_tuning_controller_boot_id }}"
    controller_namespaces: "{{ __sysctl_tuning_controller_namespaces }}"
    managed: "{{ __sysctl_tuning_managed }}"
    validated: "{{ __sysctl_tuning_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (the sysctl.d file, the live values, governor, THP and their boot
    units or tuned profile) and what was not verified here, or every mismatch.
  type: str
  returned: always
"""
