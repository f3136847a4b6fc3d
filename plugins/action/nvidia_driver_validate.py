"""The nvidia_driver role's decisions: its variables checked together and against this OS's
package table, then the host read once (hostcheck.gpu_hosts.nvidia_driver_probe).

    - hostcheck.gpu_hosts.nvidia_driver_validate:
        nvidia_driver_branch: "{{ nvidia_driver_branch }}"   # ... every nvidia_driver_* variable
        number_ranges: "{{ __nvidia_driver_number_ranges }}"
        nouveau_file: "{{ __nvidia_driver_nouveau_file }}"
        validated: "{{ __nvidia_driver_validation | default({}) }}"
      register: __nvidia_driver_validation

Checks, in this order (when nvidia_driver_enabled): the numeric variables against their ranges
(number_ranges; the base checks them before validate()); the variables together and against
this OS's package table (os_vars(): the vars file tasks/validate.yml loaded), with
nvidia_driver_settings. The decisions and the Validation this action is are in
plugins/plugin_utils/nvidia_driver_rules.py. The values returned, which the role's
vars/main.yml names __nvidia_driver_<value>, are documented in
plugins/modules/nvidia_driver_validate.py. The decisions are in
plugins/plugin_utils/nvidia_driver_rules.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    Validation,
)


class ActionModule(Validation):
    pass
