# The sysctl_tuning role's validate action (plugins/action/sysctl_tuning_validate.py); this file
# is its documentation.

DOCUMENTATION = r"""
module: sysctl_tuning_validate
short_description: Check the sysctl_tuning role's variables against the kernel, change nothing
description:
  - Checks the variables against roles/sysctl_tuning/meta/argument_specs.yml and each other
    (governor and THP modes the kernel knows, a sysctl.d file read at boot, a tuned profile
    name, sysctl names and values as sysctl.d takes them).
  - When the role is enabled, reads the host once with M(hostcheck.gpu_hosts.sysctl_tuning_probe)
    (whether the kernel is the host's own and writable, each named sysctl now and at boot, the
    cpufreq governors and THP modes offered, the role's files and units), checks the settings
    against that kernel (each a writable sysctl, numbers where it has numbers) and works out
    what must change, rendering the role's templates as the template module would.
  - Its per-OS values are those of the first of the role's vars/<distribution>-<major>.yml,
    <distribution>.yml, <os_family>-<major>.yml, <os_family>.yml.
  - Says what the role leaves alone on this host, and why (a shared or read-only kernel, no
    cpufreq, a later sysctl.d file that wins at boot).
  - The role's tasks act on the live state it reads, so it reads the host every time it runs
    (an earlier result of the run is never returned).
extends_documentation_fragment:
  - hostcheck.gpu_hosts.sysctl_tuning_variables
  - hostcheck.gpu_hosts.sysctl_tuning_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.sysctl_tuning_validate:
    sysctl_tuning_enabled: "{{ sysctl_tuning_enabled }}"
    sysctl_tuning_file: "{{ sysctl_tuning_file }}"
    # ... every other sysctl_tuning_* variable the same way
    unit_dir: "{{ __sysctl_tuning_unit_dir }}"
    governor_unit: "{{ __sysctl_tuning_governor_unit }}"
    thp_unit: "{{ __sysctl_tuning_thp_unit }}"
    tuned_profile: "{{ __sysctl_tuning_tuned_profile }}"
    thp_dir: "{{ __sysctl_tuning_thp_dir }}"
    controller_boot_id: "{{ __sysctl_tuning_controller_boot_id }}"
    controller_namespaces: "{{ __sysctl_tuning_controller_namespaces }}"
    managed: "{{ __sysctl_tuning_managed }}"
    validated: "{{ __sysctl_tuning_validation | default({}) }}"
  register: __sysctl_tuning_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use.
  type: dict
  returned: success
  contains:
    wanted:
      description: The sysctl names to write with their values as the kernel prints them
        (fields joined by one space; null values left out).
      type: dict
    changes:
      description: What main.yml must change on this host, one line each; empty when nothing
        must change or the role is switched off (main.yml then includes nothing).
      type: list
      elements: str
    probe:
      description: What M(hostcheck.gpu_hosts.sysctl_tuning_probe) read of the host (see its
        RETURN), which the tasks act on.
      type: dict
      returned: when something is to change
    units:
      description: The two boot-time settings (governor, THP), each with its unit C(name), the
        target folder that enables it (C(wants)), the C(lines) its unit and the C(tuned) lines
        the profile set, and whether this host gets it (C(wanted)).
      type: list
      elements: dict
      returned: when something is to change
    os_vars:
      description: This host's per-OS vars file of the role, as loaded
        (C(__sysctl_tuning_boot_method), C(__sysctl_tuning_packages),
        C(__sysctl_tuning_governor_after), and on the RHEL family C(__sysctl_tuning_tuned_service)
        and C(__sysctl_tuning_tuned_profile_dir)).
      type: dict
      returned: when something is to change
digest:
  description: A digest of the arguments.
  type: str
  returned: success
"""
