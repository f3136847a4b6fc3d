"""The sysctl_tuning role's validate action: every bad value the old validate.yml refused, named
by its message, first the variables alone, then against a probe result standing in for a
host's kernel."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.action.sysctl_tuning_validate import (
    ActionModule,
    sysctl_tuning_on_host,
    sysctl_tuning_wanted,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import Invalid

from tests.unit.role_validation import validate

ROLE = Path(__file__).resolve().parents[2] / "roles" / "sysctl_tuning"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SETTINGS = DEFAULTS["sysctl_tuning_settings"]
WANTED = {name: " ".join(str(value).split()) for name, value in SETTINGS.items()}
GOOD = {
    "governor": "performance",
    "thp_enabled": "madvise",
    "thp_defrag": "madvise",
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


# --- the variables ---------------------------------------------------------------------


def test_the_defaults_give_the_settings_as_the_kernel_prints_them():
    assert wanted() == WANTED
    assert wanted(governor=None, thp_enabled=None, thp_defrag=None, tuned_include="") == WANTED
    assert wanted(settings={"vm.swappiness": None}) == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"governor": "turbo"},
            "sysctl_tuning_cpu_governor: one of performance, powersave, ondemand, conservative, "
            'schedutil, userspace, or null to leave the governor alone; got "turbo"',
        ),
        ({"governor": 5}, "sysctl_tuning_cpu_governor: one of performance, "),
        ({"governor": ["performance"]}, 'got ["performance"]'),
        (
            {"thp_enabled": "sometimes"},
            "sysctl_tuning_thp_enabled: one of always, madvise, never, or null to leave it; "
            'got "sometimes"',
        ),
        (
            {"thp_defrag": "defer+never"},
            "sysctl_tuning_thp_defrag: one of always, defer, defer+madvise, madvise, never, or "
            'null to leave it; got "defer+never"',
        ),
        (
            {"sysctl_file": "/etc/sysctl.conf"},
            "sysctl_tuning_file: a file directly in /etc/sysctl.d whose name ends in .conf (only "
            'those are read at boot); got "/etc/sysctl.conf"',
        ),
        ({"sysctl_file": "/etc/sysctl.d/sub/a.conf"}, "sysctl_tuning_file: a file directly"),
        ({"sysctl_file": "/etc/sysctl.d/a.cnf"}, "sysctl_tuning_file: a file directly"),
        ({"sysctl_file": None}, "sysctl_tuning_file: a file directly in /etc/sysctl.d"),
        (
            {"tuned_include": "my profile"},
            "sysctl_tuning_tuned_include: a tuned profile name such as throughput-performance, "
            'or "" for none; got "my profile"',
        ),
        ({"tuned_include": None}, "sysctl_tuning_tuned_include: a tuned profile name"),
    ],
)
def test_bad_variables_are_named(change, message):
    with pytest.raises(Invalid) as error:
        wanted(**change)
    assert str(error.value).startswith(message) or message in str(error.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("vm.swappiness=5", "sysctl_tuning_settings: expected a mapping"),
        ({"vm/swappiness": 5}, "sysctl_tuning_settings['vm/swappiness']: not a sysctl name"),
        ({"vm.max_map_count": True}, "sysctl_tuning_settings['vm.max_map_count']: a boolean"),
        ({"vm.max_map_count": 1.5}, "['vm.max_map_count']: not an integer"),
    ],
)
def test_bad_settings_are_named(settings, message):
    with pytest.raises(AnsibleFilterError) as error:
        wanted(settings=settings)
    assert message in str(error.value)


def test_the_first_bad_variable_in_the_old_order_is_named():
    with pytest.raises(Invalid, match=r"^sysctl_tuning_cpu_governor: "):
        wanted(governor="turbo", thp_enabled="x", sysctl_file="x")
    with pytest.raises(Invalid, match=r"^sysctl_tuning_thp_defrag: "):
        wanted(thp_defrag="x", sysctl_file="x")
    with pytest.raises(Invalid, match=r"^sysctl_tuning_tuned_include: "):
        wanted(tuned_include="a b", settings="x")


# --- against the host's kernel ---------------------------------------------------------


def test_good_settings_on_a_host_of_its_own():
    assert sysctl_tuning_on_host(SETTINGS, kernel(), "performance", THP_MODES) == WANTED


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vm.no_such_knob": 1}, "['vm.no_such_knob']: not a sysctl of this host's kernel"),
        ({"kernel.random.boot_id": "x"}, "['kernel.random.boot_id']: a read-only sysctl"),
        ({"vm.swappiness": "lots"}, "['vm.swappiness']: expected an integer"),
        ({"vm.swappiness": "0x10"}, "['vm.swappiness']: expected an integer"),
        ({"net.ipv4.tcp_rmem": 16777216}, "['net.ipv4.tcp_rmem']: expected 3 integers"),
    ],
)
def test_settings_the_kernel_refuses(settings, message):
    probe = kernel()
    probe["sysctl"]["kernel.random.boot_id"] = {"exists": True, "writable": False, "value": "x"}
    with pytest.raises(AnsibleFilterError) as error:
        sysctl_tuning_on_host({**SETTINGS, **settings}, probe, "performance", THP_MODES)
    assert str(error.value).startswith("sysctl_tuning_settings[")
    assert message in str(error.value)


def test_a_governor_the_driver_does_not_offer():
    with pytest.raises(Invalid) as error:
        sysctl_tuning_on_host(SETTINGS, kernel(), "schedutil", THP_MODES)
    assert str(error.value) == (
        "sysctl_tuning_cpu_governor: schedutil is not offered by this host's cpufreq driver, "
        "which offers performance, powersave (intel_pstate and amd-pstate in active mode offer "
        "only performance and powersave)"
    )
    cpufreq = {"present": True, "governors": {}, "available": [], "paths": []}
    with pytest.raises(Invalid, match="which offers nothing"):
        sysctl_tuning_on_host(SETTINGS, kernel(cpufreq=cpufreq), "schedutil", THP_MODES)


def test_thp_modes_the_kernel_does_not_offer():
    probe = kernel()
    probe["thp"]["enabled"]["options"] = ["always", "never"]
    probe["thp"]["defrag"]["options"] = ["always", "madvise", "never"]
    with pytest.raises(Invalid) as error:
        sysctl_tuning_on_host(SETTINGS, probe, None, {"enabled": "madvise", "defrag": "defer"})
    assert str(error.value) == (
        "sysctl_tuning_thp_enabled: this kernel's /sys/kernel/mm/transparent_hugepage/enabled "
        "offers always, never, not madvise; sysctl_tuning_thp_defrag: this kernel's "
        "/sys/kernel/mm/transparent_hugepage/defrag offers always, madvise, never, not defer"
    )


def test_governor_and_thp_go_unchecked_where_the_role_does_not_set_them():
    odd = {"enabled": "madvise", "defrag": "defer"}
    probe = kernel()
    probe["thp"]["enabled"]["options"] = ["always"]
    probe["thp"]["defrag"]["options"] = ["always"]
    shared = {**probe, "live_sys_blockers": ["/sys is read-only"]}
    assert sysctl_tuning_on_host(SETTINGS, shared, "schedutil", odd) == WANTED
    # no list of governors from the driver; no THP files; null modes
    unknown = kernel(cpufreq={"present": True, "governors": {}, "available": None, "paths": []})
    assert sysctl_tuning_on_host(SETTINGS, unknown, "schedutil", THP_MODES) == WANTED
    no_thp = kernel(thp={"present": False, "enabled": None, "defrag": None})
    assert sysctl_tuning_on_host(SETTINGS, no_thp, None, odd) == WANTED
    assert sysctl_tuning_on_host(SETTINGS, probe, None, {"enabled": None, "defrag": ""})


def test_the_settings_are_checked_before_the_governor():
    with pytest.raises(AnsibleFilterError, match="not a sysctl of this host's kernel"):
        sysctl_tuning_on_host({"vm.no_such_knob": 1}, kernel(), "schedutil", THP_MODES)


def test_the_role_reads_the_kernel_afresh_every_time():
    assert ActionModule.REUSE is False


# --- the action, on this machine (switched off: the kernel is not read) -----------------


def test_the_action_validates_every_time(tmp_path):
    first, again = validate(
        "sysctl_tuning",
        {"sysctl_tuning_enabled": False, "sysctl_tuning_settings": {"vm.swappiness": [10]}},
        tmp_path,
    )
    assert first["values"] == {"wanted": {"vm.swappiness": "10"}} == again["values"]
    assert first["digest"] == again["digest"]
    assert again["msg"] == "sysctl_tuning: the variables are valid"


def test_the_action_fails_naming_the_variable(tmp_path):
    (failed,) = validate(
        "sysctl_tuning",
        {"sysctl_tuning_enabled": False, "sysctl_tuning_file": "/etc/sysctl.conf"},
        tmp_path,
    )
    assert failed["failed"] is True
    assert failed["msg"].startswith("sysctl_tuning_file: a file directly in /etc/sysctl.d")
