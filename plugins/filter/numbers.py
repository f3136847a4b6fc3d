"""{{ values | hostcheck.gpu_hosts.numbers_in_range(__<role>_number_ranges) }}: the numeric
variables of a role checked against the ranges its vars/main.yml declares, before any change
(plugins/plugin_utils/numbers.py; the roles without a validate action use it from YAML)."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import numbers_in_range


class FilterModule:
    def filters(self):
        return {"numbers_in_range": numbers_in_range}
