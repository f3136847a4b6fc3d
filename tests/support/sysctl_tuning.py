"""A fake kernel and the sysctl_tuning role's wanted settings, files and units, for the tests
of its validate and verify actions."""

from __future__ import annotations

import copy

import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    Tuning,
    expected_boot_files,
    sysctl_tuning_changes,
    sysctl_tuning_wanted,
)

from tests.paths import CHECKOUT

ROLE = CHECKOUT / "roles" / "sysctl_tuning"


DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


SETTINGS = DEFAULTS["sysctl_tuning_settings"]


WANTED = {name: " ".join(str(value).split()) for name, value in SETTINGS.items()}


GOOD = {
    "sysctl_file": "/etc/sysctl.d/90-hostcheck-training.conf",
    "tuned_include": "throughput-performance",
    "settings": SETTINGS,
}


THP_MODES = {"enabled": "madvise", "defrag": "madvise"}


def wanted(**changes):
    return sysctl_tuning_wanted(**{**GOOD, **changes})


def kernel(**changes) -> dict:
    """A probe result of a host of its own that has every default setting, cpufreq and THP."""
    probe = {
        "shared": [],
        "live_sysctl_blockers": [],
        "live_sys_blockers": [],
        "systemd": True,
        "systemd_container": "",
        "sysctl": {
            name: {
                "exists": True,
                "writable": True,
                "value": "4096 87380 6291456" if name.startswith("net.ipv4.tcp_") else "60",
                "boot": None,
                "set_by": [],
                "overridden_by": [],
            }
            for name in SETTINGS
        },
        "cpufreq": {
            "present": True,
            "governors": {"cpu0": "powersave"},
            "available": ["performance", "powersave"],
            "paths": ["/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"],
        },
        "thp": {
            "present": True,
            "enabled": {"selected": "always", "options": ["always", "madvise", "never"]},
            "defrag": {
                "selected": "madvise",
                "options": ["always", "defer", "defer+madvise", "madvise", "never"],
            },
        },
        "tuned_active_profile": None,
        "files": {GOOD["sysctl_file"]: None},
    }
    probe.update(copy.deepcopy(changes))
    return probe


FILE = GOOD["sysctl_file"]


HEADER = (
    "# Kernel tunables for PyTorch training hosts, from sysctl_tuning_settings (Ansible role\n"
    "# sysctl_tuning). Lines here are rewritten by the role; change the variable instead.\n"
)


GOVERNOR_UNIT = "/etc/systemd/system/hostcheck-cpu-governor.service"


THP_UNIT = "/etc/systemd/system/hostcheck-thp.service"


TUNED_CONF = "/etc/tuned/hostcheck-training/tuned.conf"


ROOTS_0644 = {"mode": "0644", "uid": 0, "gid": 0, "directory": False}


RUNNING = {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}


def tuning(method: str = "systemd", **changes) -> Tuning:
    asked = {
        "wanted": WANTED,
        "governor": "performance",
        "thp_modes": THP_MODES,
        "sysctl_file": FILE,
        "boot_method": method,
    }
    return Tuning(**{**asked, **changes})


def rendered(asked: Tuning, probe: dict, family: str = "Debian") -> dict[str, str]:
    """The boot files as the role's templates render them for this family's hosts."""
    family_vars = yaml.safe_load((ROLE / "vars" / f"{family}.yml").read_text())
    variables = {
        **DEFAULTS,
        "sysctl_tuning_cpu_governor": asked.governor,
        "sysctl_tuning_thp_enabled": asked.thp_modes["enabled"],
        "sysctl_tuning_thp_defrag": asked.thp_modes["defrag"],
        **family_vars,
        "__sysctl_tuning_thp_dir": asked.thp_dir,
        "ansible_managed": "Ansible managed",
    }
    return expected_boot_files(asked, probe, str(ROLE / "templates"), variables)


def converged(asked: Tuning | None = None, family: str = "Debian", **changes) -> dict:
    """A probe of a host as the role leaves it: kernel() (a host of its own with cpufreq and
    THP) with `changes`, its files, values and units as the role sets them there."""
    asked = asked or tuning("tuned" if family == "RedHat" else "systemd")
    probe = kernel(**changes)
    for name, found in probe["sysctl"].items():
        if name in asked.wanted:
            found.update(value=asked.wanted[name], boot={"file": FILE, "value": asked.wanted[name]})
    lines = "".join(f"{name}={value}\n" for name, value in asked.wanted.items())
    probe["files"] = {FILE: HEADER + lines if asked.wanted else None}
    if probe["cpufreq"]["present"] and "cpufreq" not in changes:
        probe["cpufreq"]["governors"] = {"cpu0": asked.governor or "powersave"}
    for which, mode in asked.thp_modes.items():
        if mode is not None and probe["thp"][which] is not None and "thp" not in changes:
            probe["thp"][which]["selected"] = mode
    boot_files = rendered(asked, probe, family)
    probe["stat"] = {}
    probe["units"] = {}
    for unit in asked.units(probe):
        path, link = asked.unit_path(unit), asked.unit_link(unit)
        text = boot_files.get(path)
        probe["files"].update({path: text, link: text})
        probe["stat"][path] = ROOTS_0644 if text else None
        probe["units"][unit["name"]] = RUNNING if text else {"LoadState": "not-found"}
    conf = boot_files.get(TUNED_CONF)
    probe["files"][TUNED_CONF] = conf
    probe["stat"][TUNED_CONF] = ROOTS_0644 if conf else None
    probe["stat"]["/etc/tuned/hostcheck-training"] = (
        {**ROOTS_0644, "mode": "0755", "directory": True} if conf else None
    )
    if family == "RedHat":
        probe["units"]["tuned"] = RUNNING
        if "tuned_active_profile" not in changes:
            probe["tuned_active_profile"] = "hostcheck-training"
    return probe


def changes(probe: dict, asked: Tuning | None = None, family: str = "Debian") -> list[str]:
    asked = asked or tuning("tuned" if family == "RedHat" else "systemd")
    return sysctl_tuning_changes(asked, probe, rendered(asked, probe, family))


def sandbox(**changes) -> dict:
    """A sandbox host: systemd in a container on this machine's kernel (no cpufreq), the
    sysctl file written, the THP unit enabled (and skipped by systemd), nothing set live."""
    blockers = ["/run/systemd/container says systemd-nspawn"]
    probe = converged(
        **{
            "shared": blockers,
            "live_sysctl_blockers": [*blockers, "/proc/sys is read-only"],
            "live_sys_blockers": [*blockers, "/sys is read-only"],
            "systemd_container": "systemd-nspawn",
            "cpufreq": {"present": False, "governors": {}, "available": None, "paths": []},
            **changes,
        }
    )
    probe["units"]["hostcheck-thp.service"] = {**RUNNING, "ActiveState": "inactive"}
    for name in probe["sysctl"]:
        probe["sysctl"][name]["value"] = "60"
    return probe
