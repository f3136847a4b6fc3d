"""Validates the dataset_staging role before any change: its variables together, then (read
only) the disks and the datasets' sources, so a disk that holds data, a missing source or a hot
copy too large for its tmpfs stops the play here.

    - hostcheck.gpu_hosts.dataset_staging_validate:
        dataset_staging_enabled: "{{ dataset_staging_enabled }}"   # ... every dataset_staging_*
        number_ranges: "{{ __dataset_staging_number_ranges }}"
        validated: "{{ __dataset_staging_validation | default({}) }}"
      register: __dataset_staging_validation

values (vars/main.yml names them as the role's tasks use them):
    settings  the variables checked together (plugins/plugin_utils/dataset_staging_rules.py)
    os_vars   the role's per-OS vars (vars/<os_family>.yml)
    probe     what hostcheck.gpu_hosts.dataset_disk_probe read on the host (a skipped result
              when no disk is given)
    disk      the disk plan: {action, target, refusals: [], wipe}
    measured  each dataset's measure result (dataset_stage mode measure), node ones first, with
              the dataset under __dataset_staging_item as a loop result has it
    hot_fs    {size, target} of the file system hot copies go to (when a dataset is hot)
Nothing when dataset_staging_enabled is false. Documented in
plugins/modules/dataset_staging_validate.py; the base is plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    Validation,
)


class ActionModule(Validation):
    pass
