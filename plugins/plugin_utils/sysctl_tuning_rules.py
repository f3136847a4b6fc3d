"""Kernel tunables in the sysctl_tuning role: names and values checked strictly, written the
way the kernel prints them, and sysctl.d files read back. The role's validate and verify
actions (plugins/action/sysctl_tuning_*.py) call these; its tasks use sysctl_tuning_parse_file
and sysctl_tuning_todo as filters (plugins/filter/sysctl_tuning.py).

sysctl_tuning_parse_file(file_text)             {name: value} of a sysctl.d file
sysctl_tuning_todo(wanted, file_text[, live])   [{key, value}] whose line in the file, or
    (live given: the probe's `sysctl`) whose live value, is not the wanted one
sysctl_tuning_settings(settings, 'sysctl_tuning_settings'[, probe's sysctl])
    {name: value as a string}, null values left out, or an error naming the variable and
    every bad key; given the probe's `sysctl` result as a third argument, also checks that
    each name is a writable sysctl of this host's kernel and that a number goes where the
    kernel has numbers (as many as it has: net.ipv4.tcp_rmem takes three)
sysctl_tuning_same('a  b', 'a b')               equal field by field (whitespace ignored)
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import ClassVar

import jinja2
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sysctl import (
    DOTTED_NAME_PATTERN,
    sysctl_file_lines,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    ROLES,
    Invalid,
    RoleAction,
)

_NAME = re.compile(DOTTED_NAME_PATTERN)
# Decimal only: the kernel reads 010 as octal and 0x10 as hex, which nobody means here.
_INTEGER = re.compile(r"^-?(0|[1-9][0-9]*)$")


def _value_text(value: object) -> tuple[str | None, str | None]:
    """(the value as sysctl.d and the kernel print it, why it is not a value)."""
    if isinstance(value, bool):
        return None, "a boolean; write 1 or 0"
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, float):
        return None, "not an integer"
    if isinstance(value, (list, tuple)):
        if not value:
            return None, "an empty list"
        fields = []
        for field in value:
            text, why = _value_text(field)
            if why or text is None or " " in text:
                return None, f"field {field!r}: {why or 'one word per field'}"
            fields.append(text)
        return " ".join(fields), None
    if isinstance(value, str):
        if "\n" in value or "\r" in value:
            return None, "more than one line"
        text = " ".join(value.split())
        if not text:
            return None, "empty"
        return text, None
    return None, f"a {type(value).__name__}; expected a number, a string or a list of numbers"


def _check_on_host(name: str, text: str, found: dict | None) -> str | None:
    if not found or not found.get("exists"):
        return (
            "not a sysctl of this host's kernel (misspelt, or its kernel module is not loaded: "
            "load it first, e.g. with community.general.modprobe)"
        )
    if not found.get("writable"):
        return "a read-only sysctl"
    now = (found.get("value") or "").split()
    if now and all(_INTEGER.match(field) for field in now):
        wanted = text.split()
        if len(wanted) != len(now) or not all(_INTEGER.match(field) for field in wanted):
            count = "an integer" if len(now) == 1 else f"{len(now)} integers"
            return f"expected {count}, as it has now ({' '.join(now)!r})"
    return None


def sysctl_tuning_settings(
    settings: object, name: str = "sysctl_tuning_settings", host: dict | None = None
) -> dict[str, str]:
    if not isinstance(settings, dict):
        raise AnsibleFilterError(
            f"{name}: expected a mapping of sysctl names to values (got {settings!r})"
        )
    problems = []
    wanted: dict[str, str] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not _NAME.match(key):
            problems.append(
                f"{name}[{key!r}]: not a sysctl name; write it with dots, e.g. vm.swappiness"
            )
            continue
        if value is None:
            continue  # null: not managed by the role (and dropped from its file)
        text, why = _value_text(value)
        if why is None and text is not None and host is not None:
            why = _check_on_host(key, text, host.get(key))
        if why is not None or text is None:
            problems.append(f"{name}[{key!r}]: {why} (got {value!r})")
            continue
        wanted[key] = text
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    return wanted


def sysctl_tuning_parse_file(text: str | None) -> dict[str, str]:
    """{key: value} of the role's sysctl.d file (the last line of a key wins, as at boot). Keys
    stay as written: the role's tasks hand them back to ansible.posix.sysctl, which finds a
    line by its key as written (a net/ipv4/tcp_rmem line is dropped by that name)."""
    return dict(sysctl_file_lines(text))


def sysctl_tuning_same(have: object, want: object) -> bool:
    """A live or file value against the wanted one, field by field."""
    return have is not None and str(have).split() == str(want).split()


def sysctl_tuning_todo(
    wanted: dict[str, str], file_text: object, live: dict | None = None
) -> list[dict[str, str]]:
    in_file = sysctl_tuning_parse_file(file_text)
    todo = []
    for key, value in wanted.items():
        right = in_file.get(key) == value
        if live is not None:
            right = right and sysctl_tuning_same((live.get(key) or {}).get("value"), value)
        if not right:
            todo.append({"key": key, "value": value})
    return todo


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


class Validation(RoleAction):
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
