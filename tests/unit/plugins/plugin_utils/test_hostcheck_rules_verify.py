"""The hostcheck role's verify action on plain data (what hostcheck_probe reads): the
installation, config file and latest report; the timer's units and state; the DataLoader
settings file; the verdict of a hostcheck run made now. The messages are those the integration
tests and operators look for."""

from __future__ import annotations

import json

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import (
    dataloader_verified,
    dataloader_workload,
    installation_verified,
    run_verified,
    timer_verified,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.systemd_quoting import (
    systemd_quote,
)

from tests.support.role_dataloader import HOST, PATH, VARIABLES, found, settings

VENV = "/opt/venvs/train"
CONFIG = {"checks": {"shm": {"min_size": "32MiB"}}}
WANTED = {
    "venv": VENV,
    "config_file": "/etc/hostcheck/config.yaml",
    "config": CONFIG,
    "report_dir": "/var/lib/hostcheck",
    "run": True,
    "profile": "default",
}
REPORT = {
    "schema_version": 1,
    "tool_version": "0.1.0",
    "profile": "default",
    "started_at": "2026-01-02T03:04:05Z",
    "exit_code": 0,
}


def state(
    version="0.1.0",
    config_text="# Written by Ansible\nchecks:\n  shm:\n    min_size: 32MiB\n",
    report=None,
):
    return {
        "venv": {"hostcheck": version and {"version": version}},
        "config": None if config_text is None else {"text": config_text, "mode": "0644"},
        "report": REPORT if report is None else report,
    }


def test_the_installation_config_and_report_as_wanted():
    assert installation_verified(state(), WANTED) == (
        f"hostcheck 0.1.0 in {VENV}; config and latest report (2026-01-02T03:04:05Z) as wanted"
    )
    # without hostcheck_run the report is not looked at
    assert installation_verified(state(report={}), {**WANTED, "run": False}).endswith(
        "config and latest report (not run) as wanted"
    )
    # a profile file: its name is not compared
    other = {**REPORT, "profile": "mine"}
    installation_verified(state(report=other), {**WANTED, "profile": "/etc/hostcheck/mine.yaml"})


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        ({"version": None}, "version None;"),
        ({"config_text": "checks: {}\n"}, 'holds {"checks": {}}'),
        ({"config_text": None}, "holds null"),
        ({"report": {**REPORT, "tool_version": "0.0.9"}}, "by hostcheck 0.0.9"),
        ({"report": {**REPORT, "profile": "quick"}}, "profile quick (hostcheck_profile: default)"),
        ({"report": {}}, "report.json: schema none, by hostcheck none, profile none"),
    ],
)
def test_a_drifted_installation_config_or_report_is_named(changes, shown):
    with pytest.raises(Invalid) as caught:
        installation_verified(state(**changes), WANTED)
    message = str(caught.value)
    assert message.startswith(f"hostcheck in {VENV}: version ")
    assert f"(hostcheck_config: {json.dumps(CONFIG)})" in message
    assert shown in message


def test_an_empty_config_wants_no_file():
    installation_verified(state(config_text=None), {**WANTED, "config": {}})
    with pytest.raises(Invalid, match="holds"):
        installation_verified(state(), {**WANTED, "config": {}})


ARGV = [f"{VENV}/bin/hostcheck", "run", "--profile", "quick", "--report", "json:/a b.json"]
SERVICE = "[Service]\nExecStart=" + " ".join(systemd_quote(a) for a in ARGV) + "\n"
TIMER = "[Timer]\nOnCalendar=*:0/15\n"
TIMER_WANTED = {
    "enabled": True,
    "unit_dir": "/etc/systemd/system",
    "argv": ARGV,
    "schedule": "*:0/15",
    "units": {"hostcheck.service": SERVICE, "hostcheck.timer": TIMER},
}
RUNNING = {"UnitFileState": "enabled", "ActiveState": "active"}


def units(service=SERVICE, timer=TIMER, systemd=True, running=RUNNING) -> dict:
    found = {"hostcheck.service": service, "hostcheck.timer": timer}
    return {
        "units": {n: None if t is None else {"text": t, "mode": "0644"} for n, t in found.items()},
        "systemd": systemd,
        "timer": running,
    }


def test_a_timer_as_wanted():
    held, problems = timer_verified(units(), TIMER_WANTED, "node1")
    assert problems == []
    assert held == [
        f"hostcheck.timer runs {' '.join(ARGV)} on *:0/15",
        "hostcheck.timer is enabled and active",
    ]
    held, problems = timer_verified(units(systemd=False, running={}), TIMER_WANTED, "node1")
    assert problems == [] and held[-1] == (
        "systemd is not the init system on node1: the units are checked, not the timer's state"
    )


def test_a_drifted_timer_is_named():
    _, problems = timer_verified(units(timer="[Timer]\nOnCalendar=hourly\n"), TIMER_WANTED, "n1")
    assert problems == [
        "hostcheck_timer_enabled: the units in /etc/systemd/system run "
        f'{json.dumps(ARGV)} on "hourly", wanted {json.dumps(ARGV)} on "*:0/15"'
    ]
    _, problems = timer_verified(units(service=None), TIMER_WANTED, "n1")
    assert problems[0].startswith(
        "hostcheck_timer_enabled: the units in /etc/systemd/system run []"
    )
    _, problems = timer_verified(units(timer=TIMER + "Persistent=false\n"), TIMER_WANTED, "n1")
    assert problems == [
        "hostcheck_timer_*: hostcheck.timer in /etc/systemd/system differ from what the role writes"
    ]
    stopped = {"UnitFileState": "disabled", "ActiveState": "inactive"}
    _, problems = timer_verified(units(running=stopped), TIMER_WANTED, "n1")
    assert problems == ["hostcheck.timer on n1: UnitFileState disabled, ActiveState inactive"]


def test_no_timer_wanted():
    off = {**TIMER_WANTED, "enabled": False}
    assert timer_verified(units(None, None), off, "n1") == (["no hostcheck timer, as wanted"], [])
    assert timer_verified(units(), off, "n1") == (
        [],
        ["hostcheck_timer_enabled is false but hostcheck units are still in /etc/systemd/system"],
    )


def checks(*statuses) -> str:
    ids = ["shm", "ulimits", "sysctl", "loop"]
    return json.dumps({"checks": [{"id": i, "status": s} for i, s in zip(ids, statuses)]})


def test_the_verdict_of_a_run_now():
    assert run_verified({"rc": 0, "stdout": checks("pass", "warn")}, "fail", "n1") == (
        "hostcheck passes now (2 checks)"
    )
    with pytest.raises(Invalid) as caught:
        run_verified({"rc": 1, "stdout": checks("fail", "pass", "warn")}, "fail", "n1")
    assert str(caught.value) == "hostcheck run exits 1 on n1: ['shm']"
    with pytest.raises(Invalid) as caught:
        run_verified({"rc": 1, "stdout": checks("fail", "pass", "warn")}, "warn", "n1")
    assert str(caught.value) == "hostcheck run exits 1 on n1: ['shm', 'sysctl']"
    with pytest.raises(Invalid) as caught:
        done = {"rc": 2, "stdout": "", "stderr_lines": ["a", "b", "hostcheck: error: bad"]}
        run_verified(done, "fail", "n1")
    assert str(caught.value) == "hostcheck run exits 2 on n1: ['a', 'b', 'hostcheck: error: bad']"


WORKLOAD = dataloader_workload(VARIABLES, HOST)
NOT_JSON = {"state": "malformed", "problem": "not valid JSON: x"}


def test_settings_measured_for_this_host_and_workload_hold():
    assert dataloader_verified(found(), WORKLOAD) == (
        [
            f"{PATH}: DataLoader(num_workers=3, pin_memory=False, prefetch_factor=2, "
            "persistent_workers=True) with a prefetcher, measured at 2026-01-02T03:04:05Z for "
            "this workload"
        ],
        [],
    )


@pytest.mark.parametrize(
    ("read", "named"),
    [
        (found(None), f"{PATH} does not exist"),
        (found(hostname="node9"), f"{PATH} is stale: measured on node1 with 8 CPUs, this "),
        (found(settings(workload={"batch_size": 64})), f"{PATH} records batch_size 64, "),
        (
            found({"malformed": "not JSON: x"}, judged=NOT_JSON),
            f"{PATH} is malformed: not valid JSON: x",
        ),
    ],
)
def test_a_missing_stale_or_other_workloads_file_fails_verification(read, named):
    held, problems = dataloader_verified(read, WORKLOAD)
    assert held == [] and len(problems) == 1
    assert problems[0].startswith(f"hostcheck_dataloader_enabled: {named}")


def test_switched_off_a_file_of_the_roles_fails_and_none_holds():
    assert dataloader_verified(found(), None) == (
        [],
        [
            f"hostcheck_dataloader_enabled is false but {PATH} (written by hostcheck loop "
            "--sweep --write) is still there"
        ],
    )
    assert dataloader_verified(found(None), None) == ([], [])
    assert dataloader_verified(found(settings(kind="mine")), None) == ([], [])
    assert dataloader_verified(None, WORKLOAD) == ([], [])
