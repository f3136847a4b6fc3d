"""Validates the sysctl_tuning role's variables, then (when the role is enabled) reads the host's
kernel and the role's files with the role's probe module (one round trip, changes nothing),
checks the settings against it and works out what, if anything, must change:

    - hostcheck.gpu_hosts.sysctl_tuning_validate:
        sysctl_tuning_settings: "{{ sysctl_tuning_settings }}"   # ... every sysctl_tuning_*
        unit_dir: "{{ __sysctl_tuning_unit_dir }}"                # ... the role's own names
        managed: "{{ __sysctl_tuning_managed }}"
        validated: "{{ __sysctl_tuning_validation | default({}) }}"
      register: __sysctl_tuning_validation

The values returned are documented in plugins/modules/sysctl_tuning_validate.py: what to write
(values.wanted) and what main.yml must change (values.changes, [] on a host that is as the
variables ask: main.yml then includes nothing); only when something is to change, what the
tasks act on: the probe's reading, the boot-time settings and the per-OS vars of this host.
What the role leaves alone on this host, and why, comes back as notes. The role's tasks act on
that live state (THP modes, governors, sysctl values, its files), so this validation never
returns an earlier result of the run (REUSE = False): main.yml reads the kernel again, as
provision.yml's validation did before the roles ahead of it ran. The base is
plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import ClassVar

import jinja2
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    ROLES,
    Invalid,
    RoleAction,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    sysctl_tuning_parse_file,
    sysctl_tuning_same,
    sysctl_tuning_settings,
    sysctl_tuning_todo,
)

FILE = re.compile(r"^/etc/sysctl\.d/[A-Za-z0-9_.-]+\.conf$")
TUNED_PROFILE = re.compile(r"^[A-Za-z0-9_.,-]*$")
THP_DIR = "/sys/kernel/mm/transparent_hugepage"


def _json(value: object) -> str:
    return json.dumps(value, default=str)


def sysctl_tuning_wanted(sysctl_file: str, tuned_include: str, settings: object) -> dict[str, str]:
    """The settings to write ({name: value}), or Invalid (AnsibleFilterError for the settings)
    naming the first bad variable; nothing of the host is needed. The governor and THP modes
    are the argument spec's choices, checked before."""
    if not FILE.match(sysctl_file):
        raise Invalid(
            "sysctl_tuning_file: a file directly in /etc/sysctl.d whose name ends in .conf (only "
            f"those are read at boot); got {_json(sysctl_file)}"
        )
    if not TUNED_PROFILE.match(tuned_include):
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


# systemd's ActiveState of a unit that ansible.builtin.systemd_service counts as started
STARTED = ("active", "activating")


@dataclasses.dataclass(frozen=True)
class Tuning:
    """What the role's variables ask of a host (validated), and where the role keeps it."""

    wanted: dict[str, str]
    governor: str | None
    thp_modes: dict[str, str | None]  # {"enabled": sysctl_tuning_thp_enabled, "defrag": ...}
    sysctl_file: str
    boot_method: str  # systemd (a unit per setting) or tuned (a profile)
    unit_dir: str = "/etc/systemd/system"
    governor_unit: str = "hostcheck-cpu-governor.service"
    thp_unit: str = "hostcheck-thp.service"
    tuned_service: str = "tuned"
    tuned_profile: str = "hostcheck-training"
    tuned_profile_dir: str = "/etc/tuned"
    thp_dir: str = THP_DIR

    @property
    def tuned_dir(self) -> str:
        return f"{self.tuned_profile_dir}/{self.tuned_profile}"

    @property
    def tuned_conf(self) -> str:
        return f"{self.tuned_dir}/tuned.conf"

    def boot_settings(self) -> list[dict]:
        """The governor and the THP modes at boot: the unit that sets each (systemd), the
        target folder that enables it, and the lines its unit and the tuned profile hold."""
        enabled, defrag = self.thp_modes["enabled"], self.thp_modes["defrag"]
        return [
            {
                "name": self.governor_unit,
                "wants": "multi-user.target.wants",
                "lines": [f"echo {self.governor} >"],
                "tuned": [f"governor={self.governor}"],
            },
            {
                "name": self.thp_unit,
                "wants": "sysinit.target.wants",
                "lines": [
                    f"echo {mode} > {self.thp_dir}/{which}"
                    for which, mode in self.thp_modes.items()
                    if mode
                ],
                "tuned": ([f"transparent_hugepages={enabled}"] if enabled else [])
                + ([f"{self.thp_dir}/defrag={defrag}"] if defrag else []),
            },
        ]

    def units(self, probe: dict) -> list[dict]:
        """boot_settings, each `wanted` where this host gets it: its variable is set and the
        host has its /sys files."""
        governor, thp = self.boot_settings()
        thp_set = any(mode is not None for mode in self.thp_modes.values())
        return [
            {**governor, "wanted": self.governor is not None and probe["cpufreq"]["present"]},
            {**thp, "wanted": thp_set and probe["thp"]["present"]},
        ]

    def unit_path(self, unit: dict) -> str:
        return f"{self.unit_dir}/{unit['name']}"

    def unit_link(self, unit: dict) -> str:
        return f"{self.unit_dir}/{unit['wants']}/{unit['name']}"

    def probe_args(self) -> dict:
        """What the probe reads besides the sysctls: the role's files, their modes and owners,
        and the units' state."""
        units = self.boot_settings()
        boot_files = [
            path for unit in units for path in (self.unit_path(unit), self.unit_link(unit))
        ]
        return {
            "files": [self.sysctl_file, *boot_files, self.tuned_conf],
            "stat": [*map(self.unit_path, units), self.tuned_dir, self.tuned_conf],
            "units": [unit["name"] for unit in units]
            + ([self.tuned_service] if self.boot_method == "tuned" else []),
        }

    def boot_applies(self, probe: dict) -> bool:
        """Whether main.yml keeps the governor and THP across reboots here: on a kernel of the
        host's own, or with units that systemd in a container keeps but skips."""
        return not probe["live_sys_blockers"] or (
            self.boot_method == "systemd" and bool(probe["systemd_container"])
        )


def owned_by_root(found: dict | None, mode: str, directory: bool = False) -> bool:
    """A path's stat as the probe read it: there, root's, with this mode."""
    return found == {"mode": mode, "uid": 0, "gid": 0, "directory": directory}


def sysctl_file_changes(tuning: Tuning, probe: dict) -> list[str]:
    """The lines of the role's sysctl.d file to write or drop, and the live values to set where
    the kernel takes them (sysctl.yml)."""
    path = tuning.sysctl_file
    text = probe["files"][path]
    if not tuning.wanted:
        return [] if text is None else [f"{path}: remove it (no settings)"]
    live = None if probe["live_sysctl_blockers"] else probe["sysctl"]
    return (
        ([f"{path}: create it"] if text is None else [])
        + [
            f"{item['key']} = {item['value']}"
            for item in sysctl_tuning_todo(tuning.wanted, text, live)
        ]
        + [
            f"{path}: drop {key}"
            for key in sysctl_tuning_parse_file(text)
            if key not in tuning.wanted
        ]
    )


def live_sys_changes(tuning: Tuning, probe: dict) -> list[str]:
    """The CPUs whose governor and the THP modes to set now (cpu.yml), on a kernel the role
    may set."""
    if probe["live_sys_blockers"]:
        return []
    changes = []
    if tuning.governor is not None:
        governors = probe["cpufreq"]["governors"]
        off = [cpu for cpu, governor in governors.items() if governor != tuning.governor]
        if off:
            changes.append(f"{', '.join(off)}: governor {tuning.governor}")
    for which, mode in tuning.thp_modes.items():
        found = probe["thp"][which]
        if mode is not None and found is not None and found["selected"] != mode:
            changes.append(f"{tuning.thp_dir}/{which}: {mode}")
    return changes


def boot_unit_changes(tuning: Tuning, probe: dict, expected: dict[str, str]) -> list[str]:
    """boot-systemd.yml: the wanted units written (as `expected` has them), enabled and, on a
    kernel the role may set, started; the others removed."""
    if not probe["systemd"]:
        return []
    changes = []
    for unit in tuning.units(probe):
        path = tuning.unit_path(unit)
        if not unit["wanted"]:
            if probe["files"][path] is not None:
                changes.append(f"{path}: remove it (no longer wanted)")
            continue
        if probe["files"][path] != expected[path] or not owned_by_root(probe["stat"][path], "0644"):
            changes.append(f"{path}: write it")
        state = probe["units"].get(unit["name"], {})
        if state.get("UnitFileState") != "enabled":
            changes.append(f"{unit['name']}: enable it")
        if not probe["live_sys_blockers"] and state.get("ActiveState") not in STARTED:
            changes.append(f"{unit['name']}: start it")
    return changes


def tuned_profile_changes(tuning: Tuning, probe: dict, expected: dict[str, str]) -> list[str]:
    """boot-tuned.yml: tuned installed, enabled and running, the role's profile written (as
    `expected` has it) and active; nothing when neither setting is wanted."""
    if not any(unit["wanted"] for unit in tuning.units(probe)):
        return []
    service = probe["units"].get(tuning.tuned_service, {})
    changes = []
    if service.get("LoadState") != "loaded":
        changes.append(f"{tuning.tuned_service}: install it")
    if service.get("UnitFileState") != "enabled" or service.get("ActiveState") not in STARTED:
        changes.append(f"{tuning.tuned_service}: enable and start it")
    if not owned_by_root(probe["stat"][tuning.tuned_dir], "0755", directory=True):
        changes.append(f"{tuning.tuned_dir}: create it")
    conf = tuning.tuned_conf
    if probe["files"][conf] != expected[conf] or not owned_by_root(probe["stat"][conf], "0644"):
        changes.append(f"{conf}: write it")
    if probe["tuned_active_profile"] != tuning.tuned_profile:
        changes.append(f"tuned-adm profile {tuning.tuned_profile}")
    return changes


def sysctl_tuning_changes(tuning: Tuning, probe: dict, expected: dict[str, str]) -> list[str]:
    """Everything main.yml would change on this host, one line each; [] when nothing.
    `expected` is the text of each boot file the role writes here (expected_boot_files)."""
    changes = sysctl_file_changes(tuning, probe) + live_sys_changes(tuning, probe)
    if tuning.boot_applies(probe):
        if tuning.boot_method == "systemd":
            changes += boot_unit_changes(tuning, probe, expected)
        else:
            changes += tuned_profile_changes(tuning, probe, expected)
    return changes


def blockers(probe: dict) -> list[str]:
    """Why nothing is set live here (each reason once), empty on a writable kernel of its own."""
    return list(dict.fromkeys(probe["live_sysctl_blockers"] + probe["live_sys_blockers"]))


def sysctl_tuning_notes(tuning: Tuning, probe: dict, host: str) -> list[str]:
    """What the role leaves alone on this host and why, and the files read after its own at
    boot that set other values: said on every run, changes or not."""
    notes = []
    if blockers(probe):
        skipped = []
        if probe["live_sysctl_blockers"]:
            skipped.append(
                f"live sysctl values ({tuning.sysctl_file} is still written, for the next boot "
                "of a host of its own)"
            )
        if (
            probe["live_sys_blockers"]
            and tuning.boot_method == "systemd"
            and probe["systemd_container"]
        ):
            skipped.append(
                "the CPU governor and transparent huge pages, live; at boot only by units that "
                "systemd skips in a container"
            )
        elif probe["live_sys_blockers"]:
            skipped.append(
                "the CPU governor and transparent huge pages, live and at boot (no unit, no "
                "tuned profile)"
            )
        notes.append(
            f"{host}: the kernel is not this host's own or not writable "
            f"({'; '.join(blockers(probe))}). Skipped: {'; '.join(skipped)}."
        )
    for name, value in tuning.wanted.items():
        later = probe["sysctl"][name]["overridden_by"]
        if later and not sysctl_tuning_same(later[-1][1], value):
            notes.append(
                f"{name}: {later[-1][0]} sets {later[-1][1]} and is read after "
                f"{tuning.sysctl_file} at boot, so a reboot ends with that value, not {value}: "
                "remove the line there (verify.yml fails until then)"
            )
    if not probe["live_sys_blockers"]:
        if tuning.governor is not None and not probe["cpufreq"]["present"]:
            notes.append(
                "sysctl_tuning_cpu_governor: this host has no cpufreq "
                "(/sys/devices/system/cpu/cpu*/cpufreq: a VM, or no cpufreq driver); governor "
                "left alone"
            )
        modes = [mode for mode in tuning.thp_modes.values() if mode is not None]
        if modes and not probe["thp"]["present"]:
            notes.append(
                f"sysctl_tuning_thp_enabled/defrag: this kernel has no {tuning.thp_dir}; left alone"
            )
    if tuning.boot_applies(probe) and tuning.boot_method == "systemd" and not probe["systemd"]:
        notes.append(
            f"{host} does not run systemd: the CPU governor and THP are set now, but nothing "
            "sets them again after a reboot"
        )
    wanted_units = [unit for unit in tuning.units(probe) if unit["wanted"]]
    if tuning.boot_applies(probe) and tuning.boot_method == "tuned" and not wanted_units:
        notes.append(
            "sysctl_tuning_cpu_governor and sysctl_tuning_thp_* are null (or this host lacks "
            "their /sys files): tuned and its active profile left as they are"
        )
    return notes


def expected_boot_files(
    tuning: Tuning, probe: dict, templates: str, variables: dict
) -> dict[str, str]:
    """{path: text} of the boot files the role writes on this host, rendered from the role's
    templates as ansible.builtin.template renders them (trim_blocks, the last newline kept)."""
    sources = {}
    if tuning.boot_method == "systemd":
        for unit in tuning.units(probe):
            if unit["wanted"]:
                sources[tuning.unit_path(unit)] = f"{unit['name']}.j2"
    else:
        sources[tuning.tuned_conf] = "tuned.conf.j2"
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    rendered = {}
    for path, source in sources.items():
        try:
            rendered[path] = environment.get_template(source).render(variables)
        except jinja2.TemplateError as exc:
            raise Invalid(f"sysctl_tuning: rendering templates/{source} failed: {exc}") from exc
    return rendered


class ActionModule(RoleAction):
    ROLE = "sysctl_tuning"
    # The role's own names (vars/main.yml): where it keeps its boot files, the controller's
    # kernel (lookups on the controller) and the ansible_managed line of its templates.
    INTERNAL: ClassVar[dict] = {
        "number_ranges": {"type": "dict", "required": True},
        "unit_dir": {"type": "path", "required": True},
        "governor_unit": {"type": "str", "required": True},
        "thp_unit": {"type": "str", "required": True},
        "tuned_profile": {"type": "str", "required": True},
        "thp_dir": {"type": "path", "required": True},
        "controller_boot_id": {"type": "str", "required": True},
        "controller_namespaces": {"type": "str", "required": True},
        "managed": {"type": "str", "required": True},
    }
    SWITCHED_OFF = "sysctls, CPU governor and THP left as they are"
    # main.yml acts on the live state the probe reads: read it again every time
    REUSE = False

    def validate(self) -> dict:
        governor = self.arg("sysctl_tuning_cpu_governor")
        thp_modes = {
            "enabled": self.arg("sysctl_tuning_thp_enabled"),
            "defrag": self.arg("sysctl_tuning_thp_defrag"),
        }
        settings = self.arg("sysctl_tuning_settings")
        wanted = sysctl_tuning_wanted(
            self.arg("sysctl_tuning_file"), self.arg("sysctl_tuning_tuned_include"), settings
        )
        if not self.enabled():
            return {"wanted": wanted, "changes": []}
        os_vars = self.os_vars(required=True)
        tuning = self.tuning(wanted, thp_modes, os_vars)
        probe = self.read_host(tuning)
        wanted = sysctl_tuning_on_host(settings, probe, governor, thp_modes, tuning.thp_dir)
        tuning = dataclasses.replace(tuning, wanted=wanted)
        if self.VERIFIES:
            # sysctl_tuning_verify compares these; its validation is its own (REUSE is False)
            self.checked = tuning, probe
            return {"wanted": wanted}
        for note in sysctl_tuning_notes(tuning, probe, self.host):
            self.note(note)
        expected = expected_boot_files(
            tuning, probe, str(ROLES / self.ROLE / "templates"), self.template_variables(os_vars)
        )
        changes = sysctl_tuning_changes(tuning, probe, expected)
        if not changes:
            # shown with the notes every run: only what says that nothing is to change
            return {"wanted": wanted, "changes": []}
        return {
            "wanted": wanted,
            "changes": changes,
            "probe": probe,
            "units": tuning.units(probe),
            "os_vars": os_vars,
        }

    def tuning(self, wanted: dict, thp_modes: dict, os_vars: dict) -> Tuning:
        """What the variables ask, with the role's own names and this OS's boot method."""
        return Tuning(
            wanted=wanted,
            governor=self.arg("sysctl_tuning_cpu_governor"),
            thp_modes=thp_modes,
            sysctl_file=self.arg("sysctl_tuning_file"),
            boot_method=os_vars["__sysctl_tuning_boot_method"],
            unit_dir=self.arg("unit_dir"),
            governor_unit=self.arg("governor_unit"),
            thp_unit=self.arg("thp_unit"),
            tuned_service=os_vars.get("__sysctl_tuning_tuned_service", "tuned"),
            tuned_profile=self.arg("tuned_profile"),
            tuned_profile_dir=os_vars.get("__sysctl_tuning_tuned_profile_dir", "/etc/tuned"),
            thp_dir=self.arg("thp_dir"),
        )

    def read_host(self, tuning: Tuning) -> dict:
        """What the probe module read of the kernel and the role's files (without the keys
        every module returns)."""
        read = self.on_host(
            "hostcheck.gpu_hosts.sysctl_tuning_probe",
            {
                "names": list(self.arg("sysctl_tuning_settings")),
                "controller_boot_id": self.arg("controller_boot_id"),
                "controller_namespaces": self.arg("controller_namespaces"),
                "own_file": tuning.sysctl_file,
                **tuning.probe_args(),
            },
        )
        return {
            key: value
            for key, value in read.items()
            if not key.startswith("_")
            and key not in ("invocation", "changed", "failed", "warnings", "deprecations")
        }

    def template_variables(self, os_vars: dict) -> dict:
        """What the role's templates read, as its template tasks have it: the role's variables,
        the per-OS vars, __sysctl_tuning_thp_dir and ansible_managed."""
        role_variables = {
            name: value for name, value in self.args.items() if name.startswith(f"{self.ROLE}_")
        }
        return {
            **role_variables,
            **os_vars,
            "__sysctl_tuning_thp_dir": self.arg("thp_dir"),
            "ansible_managed": self.arg("managed"),
        }
