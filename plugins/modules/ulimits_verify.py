# The ulimits role's verify action (plugins/action/ulimits_verify.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: ulimits_verify
short_description: Prove that logins and services get the ulimits role's limits, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.ulimits_validate) does (or takes its result from
    I(validated)), then reads the host once for the limits.d file, a fresh PAM login of each user
    of I(ulimits_users) (C(runuser -l), reading /proc/self/limits; nobody stands for C(*)),
    the system.conf.d drop-in and the systemd manager's DefaultLimit* (C(systemctl show)).
  - Says what holds, or fails naming every mismatch.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.ulimits_variables
  - hostcheck.gpu_hosts.ulimits_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify the limits (changes nothing)
  hostcheck.gpu_hosts.ulimits_verify:
    ulimits_enabled: "{{ ulimits_enabled }}"
    ulimits_users: "{{ ulimits_users }}"
    # ... every other ulimits_* variable the same way
    limits_file: "{{ __ulimits_limits_file }}"
    systemd_file: "{{ __ulimits_systemd_file }}"
    header: "{{ __ulimits_header }}"
    validated: "{{ __ulimits_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (the limits.d file, each login's limits, the services' limits), or
    every mismatch.
  type: str
  returned: always
"""
