# The ulimits role's validate action (plugins/action/ulimits_validate.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: ulimits_validate
short_description: Check the ulimits role's variables and what the host needs, change nothing
description:
  - Checks the variables against roles/ulimits/meta/argument_specs.yml and the limits against
    each other (soft at most hard, memlock sizes as limits.conf takes them).
  - When the role is enabled, reads the host once (M(hostcheck.gpu_hosts.ulimits_probe)) for
    fs.nr_open, the limits of PID 1 and what this login may raise, the PAM stacks of
    I(ulimits_pam_services), the limits.d file and the system.conf.d drop-in; and works out
    what differs from the variables.
  - Fails, before any role changes anything, on a bad value (naming the variable), on values
    pam_limits could not apply here (above fs.nr_open, above PID 1's hard limit without
    CAP_SYS_RESOURCE), and on a login service whose session stack lacks pam_limits.so (with
    the fix for this OS, from the role's per-OS vars).
  - The role's validate.yml runs it; main.yml and verify.yml get the same result again in the
    run through I(validated), without reading the host again.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.ulimits_variables
  - hostcheck.gpu_hosts.ulimits_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.ulimits_validate:
    ulimits_enabled: "{{ ulimits_enabled }}"
    ulimits_users: "{{ ulimits_users }}"
    # ... every other ulimits_* variable the same way
    limits_file: "{{ __ulimits_limits_file }}"
    systemd_file: "{{ __ulimits_systemd_file }}"
    header: "{{ __ulimits_header }}"
    validated: "{{ __ulimits_validation | default({}) }}"
  register: __ulimits_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use.
  type: dict
  returned: success
  contains:
    conf:
      description: Each item (nofile, memlock, nproc) with its soft and hard value as
        limits.conf takes them (C(65536), C(unlimited)).
      type: dict
    nr_open:
      description: The host's fs.nr_open.
      type: int
      returned: when ulimits_enabled
    plan:
      description: The entries of the limits.d file to remove (C(remove), each domain, type and
        item) and to set (C(set), each domain, type, item and value).
      type: dict
      returned: when ulimits_enabled
    systemd:
      description: Whether systemd services get the limits here (ulimits_systemd_enabled and
        systemd runs).
      type: bool
      returned: when ulimits_enabled
    dropin:
      description: The text of the system.conf.d drop-in.
      type: str
      returned: when ulimits_enabled
    changes:
      description: What differs from the variables, one line each; empty when nothing must
        change.
      type: list
      elements: str
      returned: when ulimits_enabled
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
"""
