"""The sysctl_tuning role's verify action: its comparisons of a probe result with what the
variables ask, on hosts as the role leaves them and drifted from that (the probe results are
those of tests/unit/plugins/action/test_sysctl_tuning_validate.py)."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.action.sysctl_tuning_verify import ActionModule
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    not_verified,
    sysctl_tuning_verified,
)

from tests.support.sysctl_tuning import (
    FILE,
    GOVERNOR_UNIT,
    HEADER,
    THP_UNIT,
    TUNED_CONF,
    WANTED,
    converged,
    sandbox,
    tuning,
)

THP_LINK = "/etc/systemd/system/sysinit.target.wants/hostcheck-thp.service"


def verified(probe: dict, **asked) -> list[str]:
    return sysctl_tuning_verified(tuning(**asked), probe)


def mismatch(probe: dict, **asked) -> str:
    with pytest.raises(Invalid) as error:
        verified(probe, **asked)
    return str(error.value)


def test_a_host_of_its_own_as_the_role_left_it():
    assert verified(converged()) == [
        f"{FILE} holds the 11 settings",
        "no sysctl.d file read after it sets another value",
        "the 11 live values are as set",
        "1 CPUs run performance",
        "THP enabled is madvise",
        "THP defrag is madvise",
        "hostcheck-cpu-governor.service is enabled",
        "hostcheck-thp.service is enabled",
    ]
    redhat = converged(family="RedHat")
    assert verified(redhat, method="tuned")[-1] == "tuned runs the profile hostcheck-training"


def test_a_sandbox_host_says_what_it_did_not_verify():
    assert not_verified(sandbox(), "node1") == (
        "node1: not verified, because the role does not set them here (/run/systemd/container "
        "says systemd-nspawn; /proc/sys is read-only; /sys is read-only): the live sysctl "
        "values; the CPU governor and THP modes (verified instead: no unit or tuned profile of "
        "the role sets them at boot unless systemd skips it in a container)"
    )
    assert verified(sandbox()) == [
        f"{FILE} holds the 11 settings",
        "no sysctl.d file read after it sets another value",
        "no unit or tuned profile of the role touches the shared kernel at boot",
        "hostcheck-thp.service is enabled (systemd skips it in a container)",
    ]
    read_only = converged(live_sysctl_blockers=["/proc/sys is read-only"])
    assert not_verified(read_only, "node1") == (
        "node1: not verified, because the role does not set them here (/proc/sys is "
        "read-only): the live sysctl values"
    )
    assert not_verified(converged(), "node1") is None


def test_an_edited_file():
    probe = converged()
    probe["files"][FILE] = probe["files"][FILE].replace("vm.swappiness=10", "vm.swappiness=60")
    message = mismatch(probe)
    assert message.startswith(f"{FILE} holds {{")
    assert '"vm.swappiness": "60"' in message
    assert message.endswith(
        f"; sysctl_tuning_settings wants {{{str(WANTED)[1:-1]}}}".replace("'", '"')
    )
    probe["files"][FILE] = None
    assert mismatch(probe).startswith(f"{FILE} holds {{}} (it does not exist); ")


def test_no_settings_want_no_file():
    probe = converged(tuning(wanted={}))
    assert verified(probe, wanted={})[0] == f"no settings: {FILE} is absent"
    probe["files"][FILE] = HEADER + "vm.swappiness=10\n"
    assert mismatch(probe, wanted={}) == (
        f'{FILE} holds {{"vm.swappiness": "10"}}; sysctl_tuning_settings wants no file'
    )


def test_a_file_read_after_ours_at_boot():
    probe = converged()
    probe["sysctl"]["vm.swappiness"]["boot"] = {
        "file": "/etc/sysctl.d/99-local.conf",
        "value": "60",
    }
    assert mismatch(probe) == (
        "vm.swappiness: the next boot ends with 60 from /etc/sysctl.d/99-local.conf, not 10: "
        "remove the line there, or set it in sysctl_tuning_settings"
    )


def test_live_values_where_the_role_sets_them():
    probe = converged()
    probe["sysctl"]["vm.swappiness"]["value"] = "60"
    assert mismatch(probe) == "vm.swappiness is 60 live, not 10"
    probe["live_sysctl_blockers"] = ["/proc/sys is read-only"]
    assert "vm.swappiness" not in " ".join(verified(probe))


def test_the_governor_and_thp():
    probe = converged()
    probe["cpufreq"]["governors"] = {"cpu0": "performance", "cpu1": "powersave"}
    probe["thp"]["defrag"]["selected"] = "always"
    assert mismatch(probe) == (
        'sysctl_tuning_cpu_governor is performance, the CPUs run {"cpu0": "performance", '
        '"cpu1": "powersave"}; sysctl_tuning_thp_defrag is madvise, the kernel has always'
    )


def test_the_boot_units():
    probe = converged()
    probe["files"][THP_LINK] = None
    probe["files"][GOVERNOR_UNIT] = probe["files"][GOVERNOR_UNIT].replace(
        "performance", "powersave"
    )
    assert mismatch(probe) == (
        f"{GOVERNOR_UNIT} is missing, not enabled (multi-user.target.wants), or does not set "
        f"echo performance >; {THP_UNIT} is missing, not enabled (sysinit.target.wants), or "
        "does not set echo madvise > /sys/kernel/mm/transparent_hugepage/enabled, echo madvise "
        "> /sys/kernel/mm/transparent_hugepage/defrag"
    )


def test_the_tuned_profile():
    probe = converged(family="RedHat", tuned_active_profile="balanced")
    assert mismatch(probe, method="tuned") == (
        f"tuned's active profile is balanced (wanted hostcheck-training), or {TUNED_CONF} does "
        "not set governor=performance, transparent_hugepages=madvise, "
        "/sys/kernel/mm/transparent_hugepage/defrag=madvise"
    )


def test_on_a_shared_kernel_nothing_of_the_roles_sets_it_at_boot():
    probe = sandbox()
    probe["files"][THP_UNIT] = probe["files"][THP_UNIT].replace(
        "ConditionVirtualization=!container", ""
    )
    probe["files"][TUNED_CONF] = "[cpu]\ngovernor=performance\n"
    assert mismatch(probe) == (
        "the kernel is not this host's own, yet the role's boot files are there without "
        f"ConditionVirtualization=!container: {THP_UNIT}, {TUNED_CONF}"
    )
    probe = sandbox()
    probe["files"][THP_LINK] = None
    assert mismatch(probe) == f"{THP_UNIT} is missing or not enabled (sysinit.target.wants)"


def test_every_mismatch_is_named_at_once():
    probe = converged()
    probe["sysctl"]["vm.swappiness"]["value"] = "60"
    probe["thp"]["enabled"]["selected"] = "never"
    probe["files"][FILE] += "vm.dirty_ratio=30\n"
    message = mismatch(probe)
    named = [
        '"vm.dirty_ratio": "30"}; sysctl_tuning_settings wants',
        "; vm.swappiness is 60 live, not 10",
        "; sysctl_tuning_thp_enabled is madvise, the kernel has never",
    ]
    assert all(part in message for part in named), message
    assert sorted(named, key=message.index) == named


def test_the_verify_action_is_a_validation_that_verifies():
    assert ActionModule.VERIFIES is True and ActionModule.REUSE is False
