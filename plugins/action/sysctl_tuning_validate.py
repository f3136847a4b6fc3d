"""Validates the sysctl_tuning role's variables, then (when the role is enabled) reads the host's
kernel and the role's files with the role's probe module (one round trip, changes nothing),
checks the settings against it and works out what, if anything, must change:

    - hostcheck.gpu_hosts.sysctl_tuning_validate:
        sysctl_tuning_settings: "{{ sysctl_tuning_settings }}"   # ... every sysctl_tuning_*
        unit_dir: "{{ __sysctl_tuning_unit_dir }}"                # ... the role's own names
        managed: "{{ __sysctl_tuning_managed }}"
        validated: "{{ __sysctl_tuning_validation | default({}) }}"
      register: __sysctl_tuning_validation

The values returned are documented in plugins/modules/sysctl_tuning_validate.py: what to write
(values.wanted) and what main.yml must change (values.changes, [] on a host that is as the
variables ask: main.yml then includes nothing); only when something is to change, what the
tasks act on: the probe's reading, the boot-time settings and the per-OS vars of this host.
What the role leaves alone on this host, and why, comes back as notes. The role's tasks act on
that live state (THP modes, governors, sysctl values, its files), so this validation never
returns an earlier result of the run (REUSE = False): main.yml reads the kernel again, as
provision.yml's validation did before the roles ahead of it ran. The base is
plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    Validation,
)


class ActionModule(Validation):
    pass
