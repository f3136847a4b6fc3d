"""Verifies the ulimits role on a host, changing nothing (roles/ulimits/tasks/verify.yml):

    - hostcheck.gpu_hosts.ulimits_verify:   # the arguments of ulimits_validate

After the validation (the run's earlier result when no ulimits_* variable changed) it reads the
host with one call of the role's probe module: our limits.d file, a fresh PAM login of each
user (runuser -l, reading /proc/self/limits; nobody stands for '*'), our system.conf.d drop-in
and the manager's DefaultLimit* (systemctl show). It says what holds, or fails naming every
mismatch. Documented in plugins/modules/ulimits_verify.py.
"""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    PROBE,
    SHOWN,
    Validation,
    login_users,
    verify_limits,
)


class ActionModule(Validation):
    VERIFIES = True

    def verify_reads(self) -> dict:
        return {"logins": login_users(self.arg("ulimits_users")), "systemctl_show": SHOWN}

    def probe_args(self) -> dict:
        """A validation made here reads what verify() needs too: the host is read once."""
        return {**super().probe_args(), **self.verify_reads()}

    def verify(self, values: dict) -> list[str]:
        paths = {
            "limits_file": self.arg("limits_file"),
            "dropin": self.arg("systemd_file"),
            "header": self.arg("header"),
        }
        probed = self.probed or self.on_host(
            PROBE, {"read": [paths["limits_file"], paths["dropin"]], **self.verify_reads()}
        )
        systemd_enabled = self.arg("ulimits_systemd_enabled")
        return verify_limits(probed, values, self.arg("ulimits_users"), systemd_enabled, paths)
