# The action plugins/action/role_switch.py; this file is its documentation.

DOCUMENTATION = r"""
module: role_switch
short_description: Put the host in <role>_on or <role>_off by the role's <role>_enabled
description:
  - Reads the host's C(<role>_enabled), or else the default of that variable in the role's
    C(meta/argument_specs.yml), and adds the host to the group C(<role>_on) or C(<role>_off),
    as M(ansible.builtin.group_by) would.
  - A value that Ansible's C(bool) filter reads as false (C(false), C(no), C(off), C(0)) is
    off; anything else is on, so the validation that runs on C(<role>_on) refuses what is not
    a boolean.
  - Each group is made a child of C(roles_switched), the hosts whose switches this run read.
  - Runs on the controller; changes nothing on the host.
options:
  role:
    description: A role of this collection, by its short name (C(shm), C(slurm_healthcheck)).
    type: str
    required: true
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Group the hosts by the roles that are on
  hostcheck.gpu_hosts.role_switch:
    role: "{{ item }}"
  loop: [shm, ulimits, slurm_healthcheck]
  changed_when: false  # a group joined is no change to the host
# then a play of the hosts a role is on for: hosts: "{{ groups['shm_on'] | default([]) }}"
"""

RETURN = r"""
add_group:
  description: The group the host joined, C(<role>_on) or C(<role>_off).
  type: str
  returned: success
parent_groups:
  description: C([roles_switched]).
  type: list
  elements: str
  returned: success
msg:
  description: The switch's value and what it means for the role on this host.
  type: str
  returned: always
"""
