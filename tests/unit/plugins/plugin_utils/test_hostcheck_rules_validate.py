"""The hostcheck role's validate action: each bad variable refused by its message, the schedule
checked by systemd-analyze and hostcheck_config by hostcheck's own schema on the controller
(both skipped where they cannot run; hostcheck_config's keys and sections are then checked
against the names hostcheck generated, with hostcheck's own messages), the whole action run
through ansible-playbook."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import (
    CHECK_CONFIG,
    RESERVED_OPTIONS,
    SYSTEMD_ANALYZE,
    calendar_problem,
    check_dataset_path,
    check_extra_args,
    check_paths,
    check_pip_packages_before,
    check_profiles,
    check_schedule,
    check_seconds,
    check_wheel,
    config_problem,
    config_shape_problem,
    run,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_schema import (
    RUN_OPTIONS,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.paths import CHECKOUT as REPO
from tests.support.role_arguments import spec_refusal

ROLE_VARS = yaml.safe_load((REPO / "roles" / "hostcheck" / "vars" / "main.yml").read_text())

PATHS = {
    "hostcheck_venv": "/opt/venvs/train",
    "hostcheck_cache_dir": "/var/cache/hostcheck",
    "hostcheck_config_file": "/etc/hostcheck/config.yaml",
    "hostcheck_report_dir": "/var/lib/hostcheck",
    "hostcheck_textfile_dir": "/var/lib/node_exporter/textfile_collector",
    "hostcheck_dataloader_path": "/etc/hostcheck/dataloader.json",
}
ANALYZE = next((p for p in SYSTEMD_ANALYZE if Path(p).is_file()), None)


def test_good_paths_pass_and_bad_ones_are_named_together():
    check_paths(PATHS)
    check_paths({**PATHS, "hostcheck_venv": "/opt/venvs/train/"})
    with pytest.raises(Invalid) as caught:
        check_paths({**PATHS, "hostcheck_venv": "venvs/train", "hostcheck_report_dir": "/"})
    assert str(caught.value) == (
        "hostcheck_venv, hostcheck_report_dir: an absolute path without spaces, not the root, "
        'got {"hostcheck_venv": "venvs/train", "hostcheck_report_dir": "/"}'
    )
    for bad in ["/my dir", "//", "", 3]:
        with pytest.raises(Invalid, match=r"^hostcheck_cache_dir: an absolute path"):
            check_paths({**PATHS, "hostcheck_cache_dir": bad})


def test_profiles():
    check_profiles("gpu-node", "/etc/hostcheck/profile.yaml")
    with pytest.raises(Invalid) as caught:
        check_profiles("gpu_node", "quick")
    assert str(caught.value) == (
        "hostcheck_profile: one of default, gpu-node, quick or the absolute path of a profile "
        "file on the host, got 'gpu_node'"
    )
    with pytest.raises(Invalid, match=r"^hostcheck_timer_profile: one of default, gpu-node"):
        check_profiles("default", "relative.yaml")


@pytest.mark.parametrize("schedule", ["", "   ", "hourly\n", "a\rb", 15, None])
def test_bad_schedules(schedule):
    with pytest.raises(Invalid) as caught:
        check_schedule(schedule)
    assert str(caught.value).startswith(
        "hostcheck_timer_schedule: a systemd OnCalendar= expression on one line, e.g. "
        "'*:0/15' or 'hourly', got "
    )


def test_calendar_message():
    assert calendar_problem("hourly", 0, "") == ""
    assert calendar_problem("every hour", 1, "Failed to parse: Invalid argument\n") == (
        'hostcheck_timer_schedule: systemd-analyze calendar rejects "every hour": '
        "Failed to parse: Invalid argument"
    )


@pytest.mark.skipif(ANALYZE is None, reason="no systemd-analyze on this machine")
def test_systemd_analyze_judges_schedules_here():
    assert run([ANALYZE, "calendar", "--", "*:0/15"])[0] == 0
    rc, _, stderr, _ = run([ANALYZE, "calendar", "--", "every hour"])
    assert rc != 0 and calendar_problem("every hour", rc, stderr).startswith(
        'hostcheck_timer_schedule: systemd-analyze calendar rejects "every hour": '
    )


def hostcheck_says(config: object) -> str:
    """What hostcheck's own validation of a --config layer says of it ('' when it passes)."""
    from hostcheck.commands.common import profile_schema
    from hostcheck.config import ConfigError, validate

    try:
        validate(config, profile_schema(), "hostcheck_config")
    except ConfigError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize(
    "config",
    [
        [],
        "checks: {}",
        {"checkz": {}},
        {"checkz": {}, "zzz": 1, "checks": {"shmm": {}}},
        {"checks": None},
        {"checks": []},
        {"checks": {"shmm": {}}},
        {"checks": {"shm": 5}},
        {"checks": {"shm": "min_size=1G", "gpu": None}},
        {"checks": {"dataloader": {"max_age_dayz": 7}}},
        {"checks": {"shm": {"min_size": "1G"}, "gpu": {"nvlink": 1, "events": 2}}},
    ],
)
def test_bad_config_shapes_are_refused_as_hostcheck_refuses_them(config):
    said = config_shape_problem(config)
    assert said.startswith("hostcheck_config: ")
    assert said == hostcheck_says(config)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"description": "x", "checks": {"shm": {"min_size": "1G"}, "gpu": {}}},
        {"checks": {"dataloader": {"max_age_days": 7}}},
        {"extends": "quick", "require_gpu": False, "job": {}, "fleet": {}},
    ],
)
def test_config_shapes_hostcheck_accepts_pass(config):
    assert hostcheck_says(config) == ""
    assert config_shape_problem(config) == ""


def test_the_options_the_role_sets_itself_are_options_of_hostcheck_run():
    assert set(RESERVED_OPTIONS) <= set(RUN_OPTIONS)


@pytest.mark.parametrize(
    "args",
    [
        ["--user trainer"],
        ["--profile", "quick"],
        ["--fail-on=warn"],
        ["--reuse-measurements"],
        ["--record-basis"],
        ["--report", "json:-"],
        ["--report=prom:-"],
        [3],
        "--user",
    ],
)
def test_bad_extra_args(args):
    with pytest.raises(Invalid) as caught:
        check_extra_args(args)
    assert str(caught.value).startswith(
        "hostcheck_extra_args: one argument per item ([--user, trainer]), without --profile or "
        "--fail-on or --reuse-measurements or --record-basis (use hostcheck_profile, "
        "hostcheck_fail_on and "
        "hostcheck_measure) and without a report to standard output (the role reads that one), "
        "got "
    )


def test_good_extra_args():
    check_extra_args([])
    check_extra_args(["--user", "trainer", "--report", "json:/tmp/r.json", "--check", "shm"])


def test_pip_packages_before():
    check_pip_packages_before(["torch==2.13.0"])
    for bad in [[""], ["  "], "torch", [None]]:
        with pytest.raises(
            Invalid, match=r"^hostcheck_pip_packages_before: a list of pip requirements"
        ):
            check_pip_packages_before(bad)


def test_dataloader_seconds_may_be_fractions():
    assert check_seconds(0.3) == 0.3 and check_seconds("2") == 2.0 and check_seconds(600) == 600
    for bad in [0, -1, 601, "soon", True, None, [1]]:
        with pytest.raises(Invalid) as caught:
            check_seconds(bad)
        assert str(caught.value).startswith(
            "hostcheck_dataloader_seconds: a number of seconds above 0 and at most 600 (0.5 is "
            "one), got "
        )


def test_dataloader_dataset_path():
    check_dataset_path("")
    check_dataset_path("/data/imagenet")
    for bad in ["data", "/my data", "/", None, 5]:
        with pytest.raises(Invalid, match=r"^hostcheck_dataloader_dataset_path: empty \(samples"):
            check_dataset_path(bad)


def test_wheel(tmp_path):
    wheel = tmp_path / "hostcheck-0.1.0-py3-none-any.whl"
    wheel.write_text("")
    (tmp_path / "pyproject.toml").write_text("")
    check_wheel("hostcheck[node]==0.1.0", "")
    check_wheel(str(wheel), "")
    check_wheel("", str(tmp_path))
    cases = {
        ("/nonexistent/h-9.9-py3-none-any.whl", ""): (
            "hostcheck_wheel: no such wheel on the controller: /nonexistent/h-9.9-py3-none-any.whl"
        ),
        ("", "/tmp/nowhere"): (
            "hostcheck_build_source: no pyproject.toml in /tmp/nowhere (hostcheck_wheel is empty, "
            "so the wheel is built from it)"
        ),
        ("", ""): (
            "hostcheck_wheel is empty and hostcheck_build_source names no checkout to build it from"
        ),
        ("-e hostcheck", ""): (
            "hostcheck_wheel: empty, a controller path ending in .whl, or a pip requirement, "
            "got -e hostcheck"
        ),
    }
    for (name, source), message in cases.items():
        with pytest.raises(Invalid) as caught:
            check_wheel(name, source)
        assert str(caught.value) == message


def test_config_messages():
    assert config_problem("py", 0, "", "", "") == ""
    assert config_problem("py", 3, "hostcheck cannot run on the controller: x", "", "") == ""
    assert (
        config_problem("py", 2, "hostcheck: error: /dev/stdin: shm.min_size: bad", "", "x")
        == "hostcheck_config: shm.min_size: bad"
    )
    assert config_problem("/usr/bin/py", 1, "", "a\nb\nc\nd", "non-zero return code") == (
        "hostcheck_config: checking it with hostcheck on the controller (/usr/bin/py) ended "
        "with exit 1: b / c / d"
    )
    rc, _, _, msg = run(["/nonexistent/python"])
    assert config_problem("/nonexistent/python", rc, "", "", msg) == (
        "hostcheck_config: checking it with hostcheck on the controller (/nonexistent/python) "
        "ended with exit 2: [Errno 2] No such file or directory: '/nonexistent/python'"
    )


def test_hostcheck_schema_judges_the_config_from_the_checkout():
    env = {"PYTHONPATH": str(REPO)}
    good = run(
        [sys.executable, "-c", CHECK_CONFIG, "default"], "checks:\n  shm: {min_size: 1G}\n", env
    )
    assert good[0] == 0, good
    bad = run(
        [sys.executable, "-c", CHECK_CONFIG, "default"], "checks:\n  shm: {min_size: 150%}\n", env
    )
    assert config_problem(sys.executable, *bad) == (
        "hostcheck_config: shm.min_size: a percentage of RAM must be above 0% and at most 100% "
        "(got '150%')"
    )
    # -S: no site-packages, so no hostcheck: the check cannot run here and is skipped
    missing = run([sys.executable, "-S", "-c", CHECK_CONFIG, "default"], "{}", {})
    assert missing[0] == 3 and config_problem(sys.executable, *missing) == ""


def test_numbers_keep_the_filter_message():
    from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import (
        numbers_in_range,
    )

    ranges = ROLE_VARS["__hostcheck_number_ranges"]
    with pytest.raises(AnsibleFilterError, match=r"^hostcheck_timer_randomized_delay_sec: a whole"):
        numbers_in_range({"hostcheck_timer_randomized_delay_sec": -1}, ranges)


# ---------------------------------------------------------------- through ansible-playbook


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        (
            {"hostcheck_fail_on": "error"},
            "hostcheck_fail_on must be one of: fail, warn, got: error",
        ),
        (
            {"hostcheck_measure": "never"},
            "hostcheck_measure must be one of: changed, always, got: never",
        ),
        (
            {"hostcheck_dataloader_sample": "png"},
            "hostcheck_dataloader_sample must be one of: jpeg, busy, sleep, got: png",
        ),
    ],
)
def test_a_choice_not_offered_is_refused_by_the_argument_spec_first(changes, refused):
    assert spec_refusal("hostcheck", changes).endswith(f"value of {refused}")
