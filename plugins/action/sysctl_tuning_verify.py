"""Verifies the sysctl_tuning role on a host, changing nothing: the role's verify.yml is this one
task.

    - hostcheck.gpu_hosts.sysctl_tuning_verify:   # the arguments of sysctl_tuning_validate

It validates as sysctl_tuning_validate does, which reads the host once with the role's probe
(the kernel, the sysctl.d files read at boot, the role's units and tuned profile), then
compares: the role's sysctl.d file, that no file read after it at boot sets another value, the
live values where the role sets them, and the governor, THP and their boot units or tuned
profile where the kernel is the host's own; on a shared kernel, that nothing of the role's
touches it at boot. Every mismatch is named in the one failure message. Documented in
plugins/modules/sysctl_tuning_verify.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    Validation,
    not_verified,
    sysctl_tuning_verified,
)


class ActionModule(Validation):
    VERIFIES = True

    def verify(self, values: dict) -> list[str]:
        tuning, probe = self.checked
        lines = sysctl_tuning_verified(tuning, probe)
        unverified = not_verified(probe, self.host)
        if unverified:
            # shown without -v and first, as the debug task that said it was
            self.note(unverified)
        return lines
