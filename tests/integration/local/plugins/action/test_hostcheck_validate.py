"""The hostcheck role's validate action through ansible-playbook on this machine: hostcheck_config
judged by hostcheck's schema (the same configurations refused by the role and by `hostcheck run
--config`, with the same message), the schedule by systemd-analyze (skipped where it cannot run),
each bad variable named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import (
    SYSTEMD_ANALYZE,
)

from tests.integration.ansible import build_wheel
from tests.paths import CHECKOUT as REPO
from tests.support.role_validation import validate, validate_cases

ANALYZE = next((p for p in SYSTEMD_ANALYZE if Path(p).is_file()), None)
BAD_DATALOADER = [
    ({"hostcheck_dataloader_sample": "png"}, "hostcheck_dataloader_sample must be one of"),
    ({"hostcheck_dataloader_enabled": "maybe"}, "hostcheck_dataloader_enabled"),
    ({"hostcheck_dataloader_batch_size": 0}, "hostcheck_dataloader_batch_size: a whole"),
    ({"hostcheck_dataloader_step_ms": -5}, "hostcheck_dataloader_step_ms: a whole"),
    ({"hostcheck_dataloader_ranks_per_node": 2000}, "hostcheck_dataloader_ranks_per_node: "),
    ({"hostcheck_dataloader_max_workers": "all"}, "hostcheck_dataloader_max_workers"),
    ({"hostcheck_dataloader_sample_cost_us": 0}, "hostcheck_dataloader_sample_cost_us: "),
    ({"hostcheck_dataloader_seconds": "soon"}, "hostcheck_dataloader_seconds: a number"),
    ({"hostcheck_dataloader_path": "dataloader.json"}, "hostcheck_dataloader_path: an abs"),
    ({"hostcheck_dataloader_dataset_path": "data"}, "hostcheck_dataloader_dataset_path: "),
]
# Configurations hostcheck run --config takes, and ones it refuses: keys, sections, thresholds.
GOOD_CONFIGS = [
    {"checks": {"dataloader": {"max_age_days": 7}}},
    {"description": "site", "checks": {"ulimits": {"min_nofile_soft": 1024}}},
    {"checks": {"shm": {"min_size": "1G", "severity": "fail"}}, "require_gpu": False},
    {"job": {}},
]
BAD_CONFIGS = [
    {"checks": {"dataloader": {"max_age_dayz": 7}}},
    {"checks": {"shmm": {}}},
    {"checkz": {}},
    {"checks": {"shm": 5}},
    {"checks": {"shm": {"min_size": "150%"}}},
    {"checks": {"shm": {"severity": "error"}}},
    {"checks": {"loop": {"seconds": -1}}},
    {"require_gpu": "yes"},
]
WRONGLY_TYPED = [
    ({"hostcheck_extra_args": "--user trainer"}, "hostcheck_extra_args"),
    ({"hostcheck_config": 5}, "hostcheck_config"),
]


def case_name(variables: dict) -> str:
    return "case_" + "_".join(sorted(variables))


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, list[dict]]:
    """The bad values of the parametrized tests below, each a host of one run."""
    cases = {case_name(v): v for v, _ in BAD_DATALOADER + WRONGLY_TYPED}
    assert len(cases) == len(BAD_DATALOADER + WRONGLY_TYPED)
    return validate_cases("hostcheck", cases, tmp_path_factory.mktemp("refused"))


def test_the_action_validates_once_and_gives_the_same_values_again(tmp_path):
    first, again = validate("hostcheck", {}, tmp_path)
    assert not first.get("failed"), first
    assert first["values"]["numbers"] == {
        "hostcheck_timer_randomized_delay_sec": 120,
        "hostcheck_dataloader_sample_cost_us": 2000,
        "hostcheck_dataloader_batch_size": 32,
        "hostcheck_dataloader_step_ms": 100,
        "hostcheck_dataloader_ranks_per_node": 0,
        "hostcheck_dataloader_max_workers": 0,
        "hostcheck_package_lock_timeout": 600,
    }
    # this machine's OS packages for the venv (Debian or EL)
    assert "__hostcheck_os_packages" in first["values"]["os_vars"]
    assert again["values"] == first["values"]
    assert again["msg"] == "hostcheck: validated earlier in this run"


def hostcheck_run_says(config: dict, tmp_path: Path) -> tuple[int, str]:
    """hostcheck run --config on this machine (its shm check only): exit code, and the error
    without hostcheck's prefix and the file's name."""
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [
            Path(sys.executable).parent / "hostcheck",
            "run",
            "--profile",
            "quick",
            "--config",
            str(path),
            "--check",
            "shm",
            "--report",
            "json:/dev/null",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stderr.strip().removeprefix(f"hostcheck: error: {path}: ")


def test_the_role_refuses_what_hostcheck_run_refuses_with_its_message(tmp_path):
    """One list for both: each configuration is a host of one validation run, and a
    hostcheck run --config of its own. Then the same with hostcheck_build_python a python that
    cannot import hostcheck: the keys and sections are checked against the names hostcheck
    generated, with the same messages, and the values are left to the host."""
    configs = {f"good{i}": c for i, c in enumerate(GOOD_CONFIGS)}
    configs |= {f"bad{i}": c for i, c in enumerate(BAD_CONFIGS)}
    source = {"hostcheck_wheel": "", "hostcheck_build_source": str(REPO)}
    cases = {name: {**source, "hostcheck_config": c} for name, c in configs.items()}
    without = {"hostcheck_build_python": "/usr/bin/python3"}
    cases |= {f"{name}_without": {**case, **without} for name, case in cases.items()}
    results = validate_cases("hostcheck", cases, tmp_path)
    for name, config in configs.items():
        rc, said = hostcheck_run_says(config, tmp_path)
        first = results[name][0]
        fallback = results[f"{name}_without"][0]
        if name.startswith("good"):
            assert rc in (0, 1), said
            assert not first.get("failed"), first["msg"]
            assert not fallback.get("failed"), fallback["msg"]
            continue
        assert rc == 2, said
        assert first.get("failed") and first["msg"] == f"hostcheck_config: {said}", first
        if fallback.get("failed"):
            assert fallback["msg"] == first["msg"]
        else:  # a value, which only hostcheck itself reads
            assert "its values left to the host (hostcheck cannot run" in fallback["msg"], fallback
    refused_without = sorted(n for n in configs if results[f"{n}_without"][0].get("failed"))
    assert refused_without == ["bad0", "bad1", "bad2", "bad3"]  # unknown keys, a section


def test_the_action_checks_the_config_with_hostcheck_schema(tmp_path):
    variables = {
        "hostcheck_wheel": "",
        "hostcheck_build_source": str(REPO),
        "hostcheck_config": {"checks": {"shm": {"min_size": "150%"}}},
    }
    good = {**variables, "hostcheck_config": {"checks": {"shm": {"min_size": "1G"}}}}
    results = validate_cases("hostcheck", {"bad": variables, "good": good}, tmp_path)
    (failed,) = results["bad"]
    assert failed["failed"] is True
    assert failed["msg"].startswith(
        "hostcheck_config: shm.min_size: a percentage of RAM must be above 0% and at most 100%"
    ), failed["msg"]
    first, _ = results["good"]
    assert not first.get("failed"), first


def test_the_hosts_of_one_config_ask_hostcheck_once_a_run(tmp_path):
    """Three hosts with one hostcheck_config and a fourth with another, validated twice each in
    one run: hostcheck checks each configuration once (hostcheck_rules.run_once_per_run)."""
    asked = tmp_path / "asked"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho asked >> {asked}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    same = {
        "hostcheck_wheel": "",
        "hostcheck_build_source": str(REPO),
        "hostcheck_build_python": str(python),
        "hostcheck_config": GOOD_CONFIGS[1],
    }
    other = {**same, "hostcheck_config": GOOD_CONFIGS[2]}
    cases = {"node1": same, "node2": same, "node3": same, "node4": other}
    results = validate_cases("hostcheck", cases, tmp_path)
    for name, runs in results.items():
        assert [r.get("failed", False) for r in runs] == [False, False], (name, runs)
    assert len(asked.read_text().splitlines()) == 2


def test_a_prebuilt_wheel_checks_the_config_with_its_own_hostcheck(tmp_path):
    """Run from a folder of the user's (no checkout on sys.path): the wheel's hostcheck reads its
    built-in profiles from inside the wheel, takes a good config and refuses a bad one."""
    wheel = build_wheel(REPO, tmp_path / "wheels")
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    good = {"hostcheck_wheel": wheel, "hostcheck_config": {"checks": {"shm": {"min_size": "1G"}}}}
    bad = {**good, "hostcheck_config": {"checks": {"shm": {"min_size": "150%"}}}}
    results = validate_cases("hostcheck", {"good": good, "bad": bad}, tmp_path, cwd=playbooks)
    first = results["good"][0]
    assert not first.get("failed"), first["msg"]
    (failed,) = results["bad"]
    assert failed["msg"].startswith(
        "hostcheck_config: shm.min_size: a percentage of RAM must be above 0% and at most 100%"
    ), failed["msg"]


def test_the_action_fails_on_the_first_bad_variable(tmp_path):
    results = validate_cases(
        "hostcheck",
        {
            "two_bad": {
                "hostcheck_timer_randomized_delay_sec": -1,
                "hostcheck_profile": "gpu_node",
            },
            "profile": {"hostcheck_profile": "gpu_node"},
            "measure": {"hostcheck_measure": "sometimes"},
        },
        tmp_path,
    )
    (failed,) = results["two_bad"]
    assert failed["msg"].startswith("hostcheck_timer_randomized_delay_sec: a whole number of")
    (failed,) = results["profile"]
    assert failed["msg"].startswith("hostcheck_profile: one of default, gpu-node, quick or")
    # what the plan rests on: meta/argument_specs.yml's choices, checked first
    (failed,) = results["measure"]
    assert "hostcheck_measure must be one of: changed, always" in failed["msg"]


@pytest.mark.parametrize(("variables", "message"), BAD_DATALOADER)
def test_the_action_refuses_bad_dataloader_variables(refused, variables, message):
    """Also when the settings file is not wanted: a bad value is a mistake either way."""
    (failed,) = refused[case_name(variables)]
    assert failed.get("failed") and message in failed["msg"], failed


@pytest.mark.skipif(ANALYZE is None, reason="no systemd-analyze on this machine")
def test_the_action_asks_systemd_analyze_when_the_timer_is_on(tmp_path):
    bad = {"hostcheck_timer_enabled": True, "hostcheck_timer_schedule": "every hour"}
    off = {**bad, "hostcheck_timer_enabled": False}
    results = validate_cases("hostcheck", {"on": bad, "off": off}, tmp_path)
    (failed,) = results["on"]
    assert failed["msg"].startswith(
        'hostcheck_timer_schedule: systemd-analyze calendar rejects "every hour": '
    )
    first, _ = results["off"]
    assert not first.get("failed"), first


@pytest.mark.skipif(ANALYZE is not None, reason="systemd-analyze is on this machine")
def test_without_systemd_analyze_the_schedule_is_not_checked(tmp_path):
    bad = {"hostcheck_timer_enabled": True, "hostcheck_timer_schedule": "every hour"}
    first, _ = validate("hostcheck", bad, tmp_path)
    assert not first.get("failed"), first
    assert "not checked with systemd-analyze calendar" in first["msg"]


@pytest.mark.parametrize(("variables", "named"), WRONGLY_TYPED)
def test_a_wrongly_typed_variable_is_refused_by_name_in_validate_yml(refused, variables, named):
    """validate.yml renders none of what reading the host needs (that is hostcheck_plan's, in
    main.yml), so a bad value is the validation's message, not a template error."""
    (failed,) = refused[case_name(variables)][:1]
    assert failed["failed"] is True
    assert named in failed["msg"]
    assert "probe" not in failed["msg"] and "template" not in failed["msg"].lower()
