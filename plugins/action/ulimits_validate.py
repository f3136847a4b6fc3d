"""Validates the ulimits role's variables, then (when the role is enabled) reads the host with
one call of the role's probe module (changes nothing): what pam_limits can set here, and how our
limits.d file and system.conf.d drop-in differ from what the variables want.

    - hostcheck.gpu_hosts.ulimits_validate:
        ulimits_users: "{{ ulimits_users }}"      # ... every ulimits_* variable
        limits_file: "{{ __ulimits_limits_file }}"
        systemd_file: "{{ __ulimits_systemd_file }}"
        header: "{{ __ulimits_header }}"
        validated: "{{ __ulimits_validation | default({}) }}"
      register: __ulimits_validation

The values returned are documented in plugins/modules/ulimits_validate.py; when
values.changes is empty, main.yml includes no task that changes anything. The base is
plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import Validation


class ActionModule(Validation):
    pass
