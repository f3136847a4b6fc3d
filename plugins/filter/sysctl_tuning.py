"""The sysctl_tuning role's filters (plugins/plugin_utils/sysctl_tuning_rules.py).

{{ file_text | sysctl_tuning_parse_file }}      {name: value} of a sysctl.d file
{{ wanted | sysctl_tuning_todo(file_text, live) }}  [{key, value}] whose line in the file, or
    (live given: the probe's `sysctl`) whose live value, is not the wanted one
"""

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    sysctl_tuning_parse_file,
    sysctl_tuning_todo,
)


class FilterModule:
    def filters(self):
        return {
            "sysctl_tuning_parse_file": sysctl_tuning_parse_file,
            "sysctl_tuning_todo": sysctl_tuning_todo,
        }
