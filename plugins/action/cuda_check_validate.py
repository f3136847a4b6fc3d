"""Validates the cuda_check role's variables (no host is read: the cuda_check_verify action,
which main.yml and verify.yml run, reads it).

    - hostcheck.gpu_hosts.cuda_check_validate:
        cuda_check_enabled: "{{ cuda_check_enabled }}"   # ... every cuda_check_* variable
        validated: "{{ __cuda_check_validation | default({}) }}"
      register: __cuda_check_validation

Checks, in this order: the version variables (each "" or dotted digits), cuda_check_venv and
the folder lists (the booleans and cuda_check_without_driver's choices are the argument spec's).
values.settings are what cuda_check_decide decides by (the version variables as
text, cuda_check_require_torch_cuda a boolean); documented in
plugins/modules/cuda_check_validate.py. The checks and the Validation this action is are in
plugins/plugin_utils/cuda_check_rules.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import Validation


class ActionModule(Validation):
    pass
