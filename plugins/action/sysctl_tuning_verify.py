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

import json

from ansible_collections.hostcheck.gpu_hosts.plugins.action.sysctl_tuning_validate import (
    ActionModule as Validation,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.action.sysctl_tuning_validate import (
    Tuning,
    blockers,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    sysctl_tuning_parse_file,
    sysctl_tuning_same,
)

CONTAINER_GUARD = "ConditionVirtualization=!container"


def sysctl_file_problems(tuning: Tuning, probe: dict) -> tuple[list[str], list[str]]:
    """(what holds, what does not) of the sysctl.d file, the next boot and the live values."""
    path, wanted = tuning.sysctl_file, tuning.wanted
    text = probe["files"][path]
    held = sysctl_tuning_parse_file(text)
    holds, problems = [], []
    if not wanted and text is None:
        holds.append(f"no settings: {path} is absent")
    elif wanted and held == wanted:
        holds.append(f"{path} holds the {len(wanted)} settings")
    else:
        problems.append(
            f"{path} holds {json.dumps(held)}{'' if text is not None else ' (it does not exist)'}; "
            f"sysctl_tuning_settings wants {json.dumps(wanted) if wanted else 'no file'}"
        )
    at_boot = []
    for name, value in wanted.items():
        boot = probe["sysctl"][name]["boot"]
        if held.get(name) != value:
            continue  # the file's own mismatch, named above
        if boot is None or not sysctl_tuning_same(boot["value"], value):
            ends = (
                f"{boot['value']} from {boot['file']}"
                if boot
                else "no value from any sysctl.d file"
            )
            at_boot.append(
                f"{name}: the next boot ends with {ends}, not {value}: remove the line there, or "
                "set it in sysctl_tuning_settings"
            )
    problems += at_boot
    if wanted and not at_boot:
        holds.append("no sysctl.d file read after it sets another value")
    if not probe["live_sysctl_blockers"]:
        live = [
            f"{name} is {probe['sysctl'][name]['value']} live, not {value}"
            for name, value in wanted.items()
            if not sysctl_tuning_same(probe["sysctl"][name]["value"], value)
        ]
        problems += live
        if wanted and not live:
            holds.append(f"the {len(wanted)} live values are as set")
    return holds, problems


def shared_kernel_problems(tuning: Tuning, probe: dict) -> tuple[list[str], list[str]]:
    """On a kernel that is not the host's own: no boot file of the role's without the guard
    that makes systemd skip it in a container, and the units a container keeps are there."""
    unguarded = [
        path
        for path, text in probe["files"].items()
        if path != tuning.sysctl_file and text is not None and CONTAINER_GUARD not in text
    ]
    if unguarded:
        problems = [
            "the kernel is not this host's own, yet the role's boot files are there without "
            f"{CONTAINER_GUARD}: {', '.join(unguarded)}"
        ]
        holds = []
    else:
        problems = []
        holds = ["no unit or tuned profile of the role touches the shared kernel at boot"]
    kept = tuning.boot_method == "systemd" and probe["systemd"] and probe["systemd_container"]
    for unit in tuning.units(probe) if kept else []:
        if not unit["wanted"]:
            continue
        path = tuning.unit_path(unit)
        if probe["files"][path] is None or probe["files"][tuning.unit_link(unit)] is None:
            problems.append(f"{path} is missing or not enabled ({unit['wants']})")
        else:
            holds.append(f"{unit['name']} is enabled (systemd skips it in a container)")
    return holds, problems


def own_kernel_problems(tuning: Tuning, probe: dict) -> tuple[list[str], list[str]]:
    """On a writable kernel of the host's own: the governor and THP modes now, and the units
    (systemd) or the tuned profile that set them at boot."""
    holds, problems = [], []
    governors = probe["cpufreq"]["governors"]
    if tuning.governor is not None and probe["cpufreq"]["present"]:
        if set(governors.values()) == {tuning.governor}:
            holds.append(f"{len(governors)} CPUs run {tuning.governor}")
        else:
            problems.append(
                f"sysctl_tuning_cpu_governor is {tuning.governor}, the CPUs run "
                f"{json.dumps(governors)}"
            )
    for which, mode in tuning.thp_modes.items():
        found = probe["thp"][which]
        if mode is None or found is None:
            continue
        if found["selected"] == mode:
            holds.append(f"THP {which} is {mode}")
        else:
            problems.append(
                f"sysctl_tuning_thp_{which} is {mode}, the kernel has {found['selected']}"
            )
    wanted_units = [unit for unit in tuning.units(probe) if unit["wanted"]]
    if tuning.boot_method == "systemd" and probe["systemd"]:
        for unit in wanted_units:
            path = tuning.unit_path(unit)
            text = probe["files"][path]
            linked = probe["files"][tuning.unit_link(unit)] is not None
            if text is not None and linked and all(line in text for line in unit["lines"]):
                holds.append(f"{unit['name']} is enabled")
            else:
                problems.append(
                    f"{path} is missing, not enabled ({unit['wants']}), or does not set "
                    f"{', '.join(unit['lines'])}"
                )
    if tuning.boot_method == "tuned" and wanted_units:
        lines = [line for unit in wanted_units for line in unit["tuned"]]
        text = probe["files"][tuning.tuned_conf] or ""
        active = probe["tuned_active_profile"]
        if active == tuning.tuned_profile and all(line in text for line in lines):
            holds.append(f"tuned runs the profile {tuning.tuned_profile}")
        else:
            problems.append(
                f"tuned's active profile is {active} (wanted {tuning.tuned_profile}), or "
                f"{tuning.tuned_conf} does not set {', '.join(lines)}"
            )
    return holds, problems


def not_verified(probe: dict, host: str) -> str | None:
    """What is not verified on this host because the role does not set it here, and why."""
    if not blockers(probe):
        return None
    unverified = []
    if probe["live_sysctl_blockers"]:
        unverified.append("the live sysctl values")
    if probe["live_sys_blockers"]:
        unverified.append(
            "the CPU governor and THP modes (verified instead: no unit or tuned profile of the "
            "role sets them at boot unless systemd skips it in a container)"
        )
    return (
        f"{host}: not verified, because the role does not set them here "
        f"({'; '.join(blockers(probe))}): {'; '.join(unverified)}"
    )


def sysctl_tuning_verified(tuning: Tuning, probe: dict) -> list[str]:
    """The lines that say what holds; Invalid naming every mismatch."""
    holds, problems = sysctl_file_problems(tuning, probe)
    kernel = shared_kernel_problems if probe["live_sys_blockers"] else own_kernel_problems
    more_holds, more_problems = kernel(tuning, probe)
    if problems or more_problems:
        raise Invalid("; ".join(problems + more_problems))
    return holds + more_holds


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
