"""Validates the hostcheck role's variables (the host is not read):

    - hostcheck.gpu_hosts.hostcheck_validate:
        hostcheck_enabled: "{{ hostcheck_enabled }}"   # ... every hostcheck_* variable
        number_ranges: "{{ __hostcheck_number_ranges }}"  # ... the role's constants
        validated: "{{ __hostcheck_validation | default({}) }}"
      register: __hostcheck_validation

Two checks run commands on the controller, where this action runs: hostcheck_timer_schedule
with systemd's own parser (`systemd-analyze calendar`, where the controller has it), and
hostcheck_config with hostcheck's own schema (hostcheck_build_python with the checkout or the
prebuilt wheel on PYTHONPATH), so the role refuses what `hostcheck run --config` refuses, with its
message. Where hostcheck cannot be imported there, its keys and sections are checked against
the names hostcheck generated (plugins/plugin_utils/hostcheck_schema.py) and its thresholds on the
host (exit 2). values.numbers: the numeric variables as integers;
values.os_vars: vars/<Distribution>-<major>.yml, <Distribution>.yml, <os_family>-<major>.yml or
<os_family>.yml (the OS packages and python the venv needs). The arguments and values are
documented in plugins/modules/hostcheck_validate.py; the decisions are in
plugins/plugin_utils/hostcheck_rules.py. What the role does on the host is hostcheck_plan's (after
the roles before it), how it turned out hostcheck_verify's.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import Validation


class ActionModule(Validation):
    pass
