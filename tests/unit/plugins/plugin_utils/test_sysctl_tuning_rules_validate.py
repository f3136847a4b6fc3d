"""The sysctl_tuning role's validate action: every bad value the old validate.yml refused, named
by its message, first the variables alone, then against a probe result standing in for a
host's kernel."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.action.sysctl_tuning_validate import (
    ActionModule,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    sysctl_tuning_notes,
    sysctl_tuning_on_host,
)

from tests.support.role_arguments import checked, spec_refusal
from tests.support.sysctl_tuning import (
    FILE,
    GOVERNOR_UNIT,
    HEADER,
    ROLE,
    ROOTS_0644,
    RUNNING,
    SETTINGS,
    THP_MODES,
    THP_UNIT,
    TUNED_CONF,
    WANTED,
    changes,
    converged,
    kernel,
    sandbox,
    tuning,
    wanted,
)

# --- the variables ---------------------------------------------------------------------


def test_the_defaults_give_the_settings_as_the_kernel_prints_them():
    assert wanted() == WANTED
    assert wanted(tuned_include="") == WANTED
    assert wanted(settings={"vm.swappiness": None}) == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"sysctl_file": "/etc/sysctl.conf"},
            "sysctl_tuning_file: a file directly in /etc/sysctl.d whose name ends in .conf (only "
            'those are read at boot); got "/etc/sysctl.conf"',
        ),
        ({"sysctl_file": "/etc/sysctl.d/sub/a.conf"}, "sysctl_tuning_file: a file directly"),
        ({"sysctl_file": "/etc/sysctl.d/a.cnf"}, "sysctl_tuning_file: a file directly"),
        ({"sysctl_file": ""}, "sysctl_tuning_file: a file directly in /etc/sysctl.d"),
        (
            {"tuned_include": "my profile"},
            "sysctl_tuning_tuned_include: a tuned profile name such as throughput-performance, "
            'or "" for none; got "my profile"',
        ),
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
    with pytest.raises(Invalid, match=r"^sysctl_tuning_file: "):
        wanted(sysctl_file="x", tuned_include="a b")
    with pytest.raises(Invalid, match=r"^sysctl_tuning_tuned_include: "):
        wanted(tuned_include="a b", settings="x")


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        (
            {"sysctl_tuning_cpu_governor": "turbo"},
            "sysctl_tuning_cpu_governor must be one of: performance, powersave, ondemand, "
            "conservative, schedutil, userspace, None, got: turbo",
        ),
        ({"sysctl_tuning_cpu_governor": 5}, "sysctl_tuning_cpu_governor must be one of: "),
        # a list of choices, which the spec's choices alone would take
        (
            {"sysctl_tuning_cpu_governor": ["performance"]},
            "sysctl_tuning_cpu_governor must be one of: performance, powersave, ondemand, "
            "conservative, schedutil, userspace, None, got: ['performance']",
        ),
        (
            {"sysctl_tuning_thp_enabled": "sometimes"},
            "sysctl_tuning_thp_enabled must be one of: always, madvise, never, None, "
            "got: sometimes",
        ),
        (
            {"sysctl_tuning_thp_defrag": "defer+never"},
            "sysctl_tuning_thp_defrag must be one of: always, defer, defer+madvise, madvise, "
            "never, None, got: defer+never",
        ),
    ],
)
def test_a_governor_or_thp_mode_not_offered_is_refused_by_the_argument_spec_first(change, refused):
    assert f"value of {refused}" in spec_refusal("sysctl_tuning", change)


def test_null_leaves_the_governor_and_thp_and_no_tuned_profile_is_included():
    leave = {
        "sysctl_tuning_cpu_governor": None,
        "sysctl_tuning_thp_enabled": None,
        "sysctl_tuning_thp_defrag": None,
        "sysctl_tuning_tuned_include": None,
    }
    # the spec keeps null for the raw choices and reads a null text as ""
    assert checked("sysctl_tuning", leave) == {
        **checked("sysctl_tuning", {}),
        **leave,
        "sysctl_tuning_tuned_include": "",
    }
    assert checked("sysctl_tuning", {"sysctl_tuning_file": None})["sysctl_tuning_file"] == ""


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


# --- what main.yml must change, and what it says ----------------------------------------


def edited(probe: dict, path: str, text: str | None) -> dict:
    probe["files"][path] = text
    return probe


def test_the_names_the_role_keeps_its_files_under_are_the_tasks_names():
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    asked = tuning("tuned", tuned_profile_dir="/etc/tuned")
    assert asked.unit_dir == role_vars["__sysctl_tuning_unit_dir"]
    assert asked.governor_unit == role_vars["__sysctl_tuning_governor_unit"]
    assert asked.thp_unit == role_vars["__sysctl_tuning_thp_unit"]
    assert asked.tuned_profile == role_vars["__sysctl_tuning_tuned_profile"]
    assert asked.thp_dir == role_vars["__sysctl_tuning_thp_dir"]
    redhat = yaml.safe_load((ROLE / "vars" / "RedHat.yml").read_text())
    assert (
        asked.tuned_conf
        == f"{redhat['__sysctl_tuning_tuned_profile_dir']}/hostcheck-training/tuned.conf"
    )
    args = asked.probe_args()
    assert args["files"] == [
        FILE,
        GOVERNOR_UNIT,
        "/etc/systemd/system/multi-user.target.wants/hostcheck-cpu-governor.service",
        THP_UNIT,
        "/etc/systemd/system/sysinit.target.wants/hostcheck-thp.service",
        TUNED_CONF,
    ]
    assert args["units"] == ["hostcheck-cpu-governor.service", "hostcheck-thp.service", "tuned"]
    assert "tuned" not in tuning().probe_args()["units"]


@pytest.mark.parametrize("family", ["Debian", "Ubuntu", "RedHat"])
def test_nothing_to_change_on_a_host_as_the_role_left_it(family):
    assert changes(converged(family=family), family=family) == []


def test_the_sysctl_file_and_live_values():
    assert changes(edited(converged(), FILE, None)) == [
        f"{FILE}: create it",
        *(f"{name} = {value}" for name, value in WANTED.items()),
    ]
    text = converged()["files"][FILE]
    assert changes(edited(converged(), FILE, text.replace("=10\n", "=60\n"))) == [
        "vm.swappiness = 10"
    ]
    assert changes(edited(converged(), FILE, text + "vm.dirty_ratio=30\n")) == [
        f"{FILE}: drop vm.dirty_ratio"
    ]
    live = converged()
    live["sysctl"]["vm.swappiness"]["value"] = "60"
    assert changes(live) == ["vm.swappiness = 10"]
    # /proc/sys read-only: live values are not the role's to set
    live["live_sysctl_blockers"] = ["/proc/sys is read-only"]
    assert changes(live) == []


def test_no_settings_remove_the_file():
    asked = tuning(wanted={})
    assert changes(converged(asked), asked) == []
    assert changes(edited(converged(asked), FILE, HEADER), asked) == [
        f"{FILE}: remove it (no settings)"
    ]


def test_the_governor_and_thp_now():
    probe = converged()
    probe["cpufreq"]["governors"] = {"cpu0": "performance", "cpu1": "powersave"}
    probe["thp"]["enabled"]["selected"] = "always"
    assert changes(probe) == [
        "cpu1: governor performance",
        "/sys/kernel/mm/transparent_hugepage/enabled: madvise",
    ]
    probe["live_sys_blockers"] = ["/sys is read-only"]
    assert changes(probe) == []  # nor at boot: no unit on a kernel the role may not set


def test_the_boot_units():
    unit = converged()["files"][THP_UNIT]
    assert changes(edited(converged(), THP_UNIT, unit.replace("madvise", "never"))) == [
        f"{THP_UNIT}: write it"
    ]
    assert changes(edited(converged(), THP_UNIT, None)) == [f"{THP_UNIT}: write it"]
    loose = converged()
    loose["stat"][THP_UNIT] = {**ROOTS_0644, "mode": "0666"}
    assert changes(loose) == [f"{THP_UNIT}: write it"]
    stopped = converged()
    stopped["units"]["hostcheck-thp.service"] = {**RUNNING, "ActiveState": "inactive"}
    stopped["units"]["hostcheck-cpu-governor.service"] = {**RUNNING, "UnitFileState": "disabled"}
    assert changes(stopped) == [
        "hostcheck-cpu-governor.service: enable it",
        "hostcheck-thp.service: start it",
    ]
    # the governor switched off (null): its unit goes
    asked = tuning(governor=None)
    left = converged(asked)
    left["files"][GOVERNOR_UNIT] = unit
    assert changes(left, asked) == [f"{GOVERNOR_UNIT}: remove it (no longer wanted)"]
    # without systemd nothing is done at boot
    assert changes(edited(converged(systemd=False), THP_UNIT, None)) == []


def test_in_a_container_units_are_enabled_not_started_and_nothing_is_set_live():
    probe = sandbox()
    assert probe["files"][GOVERNOR_UNIT] is None and probe["files"][THP_UNIT]
    assert changes(probe) == []
    probe["units"]["hostcheck-thp.service"] = {**RUNNING, "UnitFileState": "disabled"}
    assert changes(probe) == ["hostcheck-thp.service: enable it"]


def test_tuned():
    redhat = {"family": "RedHat"}
    probe = converged(**redhat)
    probe["units"]["tuned"] = {"LoadState": "not-found", "ActiveState": "inactive"}
    probe["tuned_active_profile"] = "balanced"
    probe["files"][TUNED_CONF] = probe["files"][TUNED_CONF].replace("madvise", "never")
    probe["stat"]["/etc/tuned/hostcheck-training"] = None
    assert changes(probe, **redhat) == [
        "tuned: install it",
        "tuned: enable and start it",
        "/etc/tuned/hostcheck-training: create it",
        f"{TUNED_CONF}: write it",
        "tuned-adm profile hostcheck-training",
    ]
    # governor and THP null: tuned is left alone, whatever it runs
    asked = tuning("tuned", governor=None, thp_modes={"enabled": None, "defrag": None})
    assert (
        changes(converged(asked, tuned_active_profile="balanced", **redhat), asked, **redhat) == []
    )
    # on a kernel the role may not set, no profile either
    assert changes(converged(live_sys_blockers=["/sys is read-only"], **redhat), **redhat) == []


def test_the_tuned_profile_sets_what_verify_looks_for():
    probe = converged(family="RedHat")
    text = probe["files"][TUNED_CONF]
    lines = [line for unit in tuning("tuned").units(probe) for line in unit["tuned"]]
    assert lines == [
        "governor=performance",
        "transparent_hugepages=madvise",
        "/sys/kernel/mm/transparent_hugepage/defrag=madvise",
    ]
    assert all(line in text for line in lines)


def test_the_notes_on_a_sandbox_host():
    notes = sysctl_tuning_notes(tuning(), sandbox(), "node1")
    assert notes == [
        "node1: the kernel is not this host's own or not writable (/run/systemd/container says "
        "systemd-nspawn; /proc/sys is read-only; /sys is read-only). Skipped: live sysctl values "
        f"({FILE} is still written, for the next boot of a host of its own); the CPU governor "
        "and transparent huge pages, live; at boot only by units that systemd skips in a "
        "container."
    ]
    no_container = sandbox(systemd_container="")
    assert (
        notes[0].replace(
            "live; at boot only by units that systemd skips in a container",
            "live and at boot (no unit, no tuned profile)",
        )
        == sysctl_tuning_notes(tuning(), no_container, "node1")[0]
    )


def test_the_notes_on_a_host_of_its_own():
    assert sysctl_tuning_notes(tuning(), converged(), "node1") == []
    probe = converged(
        cpufreq={"present": False, "governors": {}, "available": None, "paths": []},
        thp={"present": False, "enabled": None, "defrag": None},
        systemd=False,
    )
    probe["sysctl"]["vm.swappiness"]["overridden_by"] = [["/etc/sysctl.d/99-local.conf", "60"]]
    probe["sysctl"]["vm.max_map_count"]["overridden_by"] = [["/etc/sysctl.conf", "262144"]]
    assert sysctl_tuning_notes(tuning(), probe, "node1") == [
        "vm.swappiness: /etc/sysctl.d/99-local.conf sets 60 and is read after "
        f"{FILE} at boot, so a reboot ends with that value, not 10: remove the line there "
        "(verify.yml fails until then)",
        "sysctl_tuning_cpu_governor: this host has no cpufreq (/sys/devices/system/cpu/cpu*/"
        "cpufreq: a VM, or no cpufreq driver); governor left alone",
        "sysctl_tuning_thp_enabled/defrag: this kernel has no "
        "/sys/kernel/mm/transparent_hugepage; left alone",
        "node1 does not run systemd: the CPU governor and THP are set now, but nothing sets "
        "them again after a reboot",
    ]
    asked = tuning("tuned", governor=None, thp_modes={"enabled": None, "defrag": None})
    assert sysctl_tuning_notes(asked, converged(asked, family="RedHat"), "node1") == [
        "sysctl_tuning_cpu_governor and sysctl_tuning_thp_* are null (or this host lacks their "
        "/sys files): tuned and its active profile left as they are"
    ]
