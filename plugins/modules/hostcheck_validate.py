# The hostcheck role's validate action (plugins/action/hostcheck_validate.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: hostcheck_validate
short_description: Check the hostcheck role's variables, change nothing
description:
  - Checks the variables against roles/hostcheck/meta/argument_specs.yml, then each against
    what hostcheck accepts (its built-in profiles, the options the role sets itself) and the
    ranges of the numeric ones. On the controller, where this action runs, it asks
    C(systemd-analyze calendar) about I(hostcheck_timer_schedule) (when the timer is on and the
    controller has it) and hostcheck itself about I(hostcheck_config), so it refuses what
    C(hostcheck run --config) refuses, with its message. Where hostcheck cannot be imported
    there (or I(hostcheck_wheel) is a pip requirement), the config's keys and sections are
    checked against the names hostcheck's schema generated
    (plugins/plugin_utils/hostcheck_schema.py), with the same messages; its values are left to
    the host (a note says so where hostcheck cannot be imported).
  - When the role is enabled, picks the role's per-OS vars (the OS packages and the python the
    venv needs); an OS without any fails.
  - The role's validate.yml runs it; main.yml gets the same result again in the run through
    I(validated), without checking again.
  - The host is not read; M(hostcheck.gpu_hosts.hostcheck_plan) reads it after the roles
    before this one.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.hostcheck_variables
  - hostcheck.gpu_hosts.hostcheck_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.hostcheck_validate:
    hostcheck_enabled: "{{ hostcheck_enabled }}"
    hostcheck_venv: "{{ hostcheck_venv }}"
    # ... every other hostcheck_* variable the same way
    number_ranges: "{{ __hostcheck_number_ranges }}"
    validated: "{{ __hostcheck_validation | default({}) }}"
  register: __hostcheck_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use.
  type: dict
  returned: success
  contains:
    numbers:
      description: The numeric variables of I(number_ranges), as integers.
      type: dict
    os_vars:
      description: The role's per-OS vars for this host (C(__hostcheck_os_packages),
        C(__hostcheck_os_python)); empty when hostcheck_enabled is false.
      type: dict
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
msg:
  description: The notes of the validation.
  type: str
  returned: always
"""
