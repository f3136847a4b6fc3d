"""The pillow_simd role's decisions: its variables checked, then (read-only, one command) what
is at pillow_simd_venv on the host and its CPU flags, which decide the AVX2 build; the per-OS
package lists and cache key (os_vars()) and the inputs of files/pillow_simd_probe.py.

    - hostcheck.gpu_hosts.pillow_simd_validate:
        pillow_simd_venv: "{{ pillow_simd_venv }}"   # ... every pillow_simd_* variable
        validated: "{{ __pillow_simd_validation | default({}) }}"
      register: __pillow_simd_validation

The values returned, which the role's vars/main.yml names __pillow_simd_<value>, are documented
in plugins/modules/pillow_simd_validate.py. The decisions are in
plugins/plugin_utils/pillow_simd_rules.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.pillow_simd_rules import (
    Validation,
)


class ActionModule(Validation):
    pass
