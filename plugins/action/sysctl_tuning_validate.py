"""Validates the sysctl_tuning role's variables, then (when the role is enabled) reads the host's
kernel with the role's probe module (changes nothing) and checks the settings against it:

    - hostcheck.gpu_hosts.sysctl_tuning_validate:
      register: __sysctl_tuning_validation

values.wanted is {sysctl name: value as the kernel prints it} (null values left out);
values.probe is what plugins/modules/sysctl_tuning_probe.py read (only when the role is
enabled). The role's tasks act on that live state (THP modes, governors, sysctl values, its
files), so this validation never returns an earlier result of the run (REUSE = False): main.yml
reads the kernel again, as provision.yml's validation did before the roles ahead of it ran. The
rest is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import json
import re

from ansible_collections.hostcheck.gpu_hosts.plugins.filter.sysctl_tuning import (
    sysctl_tuning_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    Invalid,
    RoleValidation,
)

# What the kernel accepts (cpufreq governors; the THP modes of mm/transparent_hugepage).
GOVERNORS = ["performance", "powersave", "ondemand", "conservative", "schedutil", "userspace"]
THP_ENABLED_MODES = ["always", "madvise", "never"]
THP_DEFRAG_MODES = ["always", "defer", "defer+madvise", "madvise", "never"]
FILE = re.compile(r"^/etc/sysctl\.d/[A-Za-z0-9_.-]+\.conf$")
TUNED_PROFILE = re.compile(r"^[A-Za-z0-9_.,-]*$")
THP_DIR = "/sys/kernel/mm/transparent_hugepage"


def _json(value: object) -> str:
    return json.dumps(value, default=str)


def _one_of(value: object, choices: list[str]) -> bool:
    return value is None or (isinstance(value, str) and value in choices)


def sysctl_tuning_wanted(
    governor: object,
    thp_enabled: object,
    thp_defrag: object,
    sysctl_file: object,
    tuned_include: object,
    settings: object,
) -> dict[str, str]:
    """The settings to write ({name: value}), or Invalid (AnsibleFilterError for the settings)
    naming the first bad variable; nothing of the host is needed."""
    if not _one_of(governor, GOVERNORS):
        raise Invalid(
            f"sysctl_tuning_cpu_governor: one of {', '.join(GOVERNORS)}, or null to leave the "
            f"governor alone; got {_json(governor)}"
        )
    if not _one_of(thp_enabled, THP_ENABLED_MODES):
        raise Invalid(
            f"sysctl_tuning_thp_enabled: one of {', '.join(THP_ENABLED_MODES)}, or null to leave "
            f"it; got {_json(thp_enabled)}"
        )
    if not _one_of(thp_defrag, THP_DEFRAG_MODES):
        raise Invalid(
            f"sysctl_tuning_thp_defrag: one of {', '.join(THP_DEFRAG_MODES)}, or null to leave "
            f"it; got {_json(thp_defrag)}"
        )
    if not isinstance(sysctl_file, str) or not FILE.match(sysctl_file):
        raise Invalid(
            "sysctl_tuning_file: a file directly in /etc/sysctl.d whose name ends in .conf (only "
            f"those are read at boot); got {_json(sysctl_file)}"
        )
    if not isinstance(tuned_include, str) or not TUNED_PROFILE.match(tuned_include):
        raise Invalid(
            "sysctl_tuning_tuned_include: a tuned profile name such as throughput-performance, "
            f'or "" for none; got {_json(tuned_include)}'
        )
    return sysctl_tuning_settings(settings, "sysctl_tuning_settings")


def sysctl_tuning_on_host(
    settings: dict, probe: dict, governor: str | None, thp_modes: dict, thp_dir: str = THP_DIR
) -> dict[str, str]:
    """The settings checked against the host's kernel as the probe read it (each name a
    writable sysctl there, numbers where it has numbers), and the governor and THP modes
    against what the host offers (where the role sets them: /sys writable, the kernel its
    own). `thp_modes` is {"enabled": sysctl_tuning_thp_enabled, "defrag": ..._defrag}."""
    wanted = sysctl_tuning_settings(settings, "sysctl_tuning_settings", probe["sysctl"])
    live = not probe["live_sys_blockers"]
    offered = probe["cpufreq"]["available"]
    if live and governor is not None and offered is not None and governor not in offered:
        raise Invalid(
            f"sysctl_tuning_cpu_governor: {governor} is not offered by this host's cpufreq "
            f"driver, which offers {', '.join(offered) or 'nothing'} (intel_pstate and "
            "amd-pstate in active mode offer only performance and powersave)"
        )
    problems = []
    for which, mode in thp_modes.items():
        found = probe["thp"][which]
        asked = live and mode not in (None, "", "None") and found is not None
        if asked and mode not in found["options"]:
            problems.append(
                f"sysctl_tuning_thp_{which}: this kernel's {thp_dir}/{which} offers "
                f"{', '.join(found['options'])}, not {mode}"
            )
    if problems:
        raise Invalid("; ".join(problems))
    return wanted


class ActionModule(RoleValidation):
    # main.yml acts on the live state the probe reads: read it again every time
    REUSE = False

    def validate(self) -> dict:
        governor = self.var("sysctl_tuning_cpu_governor")
        thp_modes = {
            "enabled": self.var("sysctl_tuning_thp_enabled"),
            "defrag": self.var("sysctl_tuning_thp_defrag"),
        }
        sysctl_file = self.var("sysctl_tuning_file")
        settings = self.var("sysctl_tuning_settings")
        wanted = sysctl_tuning_wanted(
            governor,
            thp_modes["enabled"],
            thp_modes["defrag"],
            sysctl_file,
            self.var("sysctl_tuning_tuned_include"),
            settings,
        )
        if not self.enabled():
            return {"wanted": wanted}
        read = self.on_host(
            "hostcheck.gpu_hosts.sysctl_tuning_probe",
            {
                "names": list(settings),
                # the controller's kernel boot and namespaces (vars/main.yml, lookups)
                "controller_boot_id": self.value("__sysctl_tuning_controller_boot_id"),
                "controller_namespaces": self.value("__sysctl_tuning_controller_namespaces"),
                "own_file": sysctl_file,
                "files": [sysctl_file],
            },
        )
        probe = {
            key: value
            for key, value in read.items()
            if not key.startswith("_")
            and key not in ("invocation", "changed", "failed", "warnings", "deprecations")
        }
        wanted = sysctl_tuning_on_host(
            settings, probe, governor, thp_modes, self.value("__sysctl_tuning_thp_dir")
        )
        return {"wanted": wanted, "probe": probe}
