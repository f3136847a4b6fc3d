"""The hostcheck role's systemd units: command lines written the way systemd reads them
(plugins/plugin_utils/systemd_quoting.py).

{{ argv | map('hostcheck_systemd_quote') | join(' ') }}   an ExecStart= value
"""

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.systemd_quoting import (
    systemd_quote,
)


class FilterModule:
    def filters(self):
        return {"hostcheck_systemd_quote": systemd_quote}
