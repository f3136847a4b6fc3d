"""The hostcheck role on sandbox hosts: installed into the training venv from a wheel built on
the controller, run with site thresholds, the report kept on the host, the host failed (with the
failing checks and their remedies) when a check fails, idempotent, and a no-op in check mode."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.integration.ansible import run_playbook
from tests.sandbox.fleet import CHECKOUT

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/hostcheck.yml"
VENV = "/opt/venvs/train"
REPORT = "/var/lib/hostcheck/report.json"
CONFIG = "/etc/hostcheck/config.yaml"
WHEEL_INFO = CHECKOUT / "roles" / "hostcheck" / "files" / "wheel_info.py"
SHOW = "hostcheck : Show the verdict and the warnings"
SAY_WHY = "hostcheck : Say why hostcheck does not run in check mode"
VERIFY_RUN = "hostcheck : Run hostcheck now (report to standard output only)"
VERIFY_STATE = "hostcheck : Compare with hostcheck_venv, hostcheck_config and hostcheck_profile"
SANDBOX_VARS = yaml.safe_load(
    (CHECKOUT / "inventory" / "sandbox_group_vars" / "all" / "hostcheck.yml").read_text()
)


def merged(base: dict, override: dict) -> dict:
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


# The sandbox settings, lowered to what a bare host (no other role applied) has: a 64 MiB
# /dev/shm and sshd's 1024 open files.
VALUES = merged(
    SANDBOX_VARS,
    {
        "hostcheck_config": {
            "checks": {
                "shm": {"min_size": "32MiB", "min_free": "16MiB"},
                "ulimits": {"min_nofile_soft": 1024},
            }
        }
    },
)


def state(fleet, host) -> str:
    """What the role may change on a host: files with size and mtime, the venv's packages."""
    done = fleet.ssh(
        host,
        f"stat -c '%n %s %.9Y' {REPORT} {CONFIG} /var/cache/hostcheck/* "
        f"{VENV}/lib/python3*/site-packages/hostcheck-*.dist-info/RECORD 2>&1; "
        f"ls -d /var/lib/hostcheck /etc/hostcheck /var/cache/hostcheck {VENV} 2>&1; "
        f"{VENV}/bin/python -m pip list --format freeze 2>&1 | grep -iE '^(torch|hostcheck)=='",
    )
    return done.stdout


def read_json(fleet, host, path: str) -> dict:
    done = fleet.ssh(host, f"cat {path}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("hostcheck", hosts=1)


@pytest.fixture(scope="module")
def converged(fleet):
    """The first run on a fresh host (wheel built from the checkout), for the tests to look at."""
    return run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)


def build_wheel(source, cache) -> str:
    done = subprocess.run(
        [sys.executable, str(WHEEL_INFO), "build", str(source), str(cache)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)["path"]


@pytest.fixture(scope="module")
def fast(tmp_path_factory) -> dict:
    """VALUES with the checkout's wheel built once (hostcheck_wheel: a prebuilt wheel), so
    the runs that test something else do not build it again."""
    cache = tmp_path_factory.mktemp("wheels")
    return {**VALUES, "hostcheck_wheel": build_wheel(CHECKOUT, cache)}


def test_installs_runs_keeps_the_report_and_second_run_changes_nothing(fleet, converged):
    (host,) = fleet.hosts()
    assert converged.returncode == 0, converged.stderr + str(converged.messages(host.name))
    # torch first, wheel folder, wheel, hostcheck, config folder, config file, report folder
    assert converged.changed(host.name) == 7
    versions = fleet.ssh(
        host,
        f"{VENV}/bin/hostcheck --version; "
        f"{VENV}/bin/python -c 'import torch; print(torch.__version__)'",
    )
    assert versions.stdout.split() == ["hostcheck", "0.1.0", "2.13.0+cpu"], versions.stderr
    report = read_json(fleet, host, REPORT)
    assert report["schema_version"] == 1
    assert report["profile"]["name"] == "default"
    assert any(CONFIG in source for source in report["profile"]["sources"])
    assert report["exit_code"] == 0 and report["verdict"] == "warn"
    config = yaml.safe_load(fleet.ssh(host, f"cat {CONFIG}").stdout)
    assert config == VALUES["hostcheck_config"]
    # warnings are shown with their remedies, not fatal
    shown = converged.task_results(SHOW)[host.name]["msg"]
    assert "warnings (not fatal" in shown and "- sysctl [warn]: " in shown
    assert "remedy: set sysctl_tuning_settings" in shown

    second = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert second.returncode == 0, second.stderr
    assert second.changed(host.name) == 0
    assert read_json(fleet, host, REPORT)["started_at"] >= report["started_at"]
    # provisioning ended with hostcheck passing in the same run: verify does not run it again
    assert second.task_results(VERIFY_RUN)[host.name].get("skipped") is True
    # verify.yml alone does, and proves the report provisioning left
    alone = run_playbook(fleet, "playbooks/verify.yml", extra_vars=VALUES, tags="hostcheck")
    assert alone.returncode == 0, alone.stderr + str(alone.messages(host.name))
    assert alone.task_results(VERIFY_RUN)[host.name]["rc"] == 0
    assert "as wanted" in alone.task_results(VERIFY_STATE)[host.name]["msg"]


def test_check_mode_on_a_converged_host_runs_hostcheck_and_writes_nothing(fleet, converged, fast):
    (host,) = fleet.hosts()
    before = state(fleet, host)
    run = run_playbook(fleet, PLAYBOOK, extra_vars=fast, check=True, diff=True)
    assert run.returncode == 0, run.stderr
    assert run.changed(host.name) == 0
    shown = run.task_results(SHOW)[host.name]["msg"]
    assert "report not written (check mode)" in shown
    assert state(fleet, host) == before


def test_a_failing_check_fails_the_host_with_ids_and_remedies(fleet, converged, fast):
    (host,) = fleet.hosts()
    failing = merged(fast, {"hostcheck_config": {"checks": {"shm": {"min_size": "1TiB"}}}})
    run = run_playbook(fleet, PLAYBOOK, extra_vars=failing)
    assert run.returncode != 0 and run.failed_hosts() == [host.name]
    report = read_json(fleet, host, REPORT)  # kept on the host, valid, for this run
    assert report["schema_version"] == 1 and report["exit_code"] == 1
    shm = next(c for c in report["checks"] if c["id"] == "shm")
    assert shm["status"] == "fail"
    (message,) = run.messages(host.name)
    assert f"1 check(s) failed on {host.name}" in message and REPORT in message
    assert f"- shm [fail]: {shm['summary']}; remedy: {shm['remedy']}" in message
    assert "set shm_size (role shm)" in message
    assert "[warn]" not in message  # warnings are not failures under hostcheck_fail_on: fail


def test_fail_on_warn_fails_the_host_on_warnings(fleet, converged, fast):
    (host,) = fleet.hosts()
    run = run_playbook(fleet, PLAYBOOK, extra_vars={**fast, "hostcheck_fail_on": "warn"})
    assert run.returncode != 0
    (message,) = run.messages(host.name)
    assert "- sysctl [warn]: " in message and "remedy: " in message
    assert read_json(fleet, host, REPORT)["exit_code"] == 1


def test_exit_2_fails_the_host_with_hostcheck_stderr(fleet, converged, fast):
    (host,) = fleet.hosts()
    before = read_json(fleet, host, REPORT)
    run = run_playbook(
        fleet, PLAYBOOK, extra_vars={**fast, "hostcheck_extra_args": ["--check", "nosuch"]}
    )
    assert run.returncode != 0
    (message,) = run.messages(host.name)
    assert f"hostcheck could not assess {host.name} (exit 2)" in message
    assert "hostcheck: error: --check nosuch: no such check" in message
    assert read_json(fleet, host, REPORT) == before  # no report written, the last one kept


def test_a_rebuilt_wheel_of_the_same_version_replaces_hostcheck_alone(fleet, converged, tmp_path):
    """Same version, other content: reinstalled (--force-reinstall --no-deps, torch untouched);
    then back to the checkout's build. Also the prebuilt-wheel path of hostcheck_wheel."""
    (host,) = fleet.hosts()
    source = tmp_path / "src"
    shutil.copytree(
        CHECKOUT,
        source,
        ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "build", "*.egg-info", "tests"),
    )
    init = source / "hostcheck" / "__init__.py"
    init.write_text(init.read_text() + "# rebuilt-for-test\n")
    wheel = build_wheel(source, tmp_path / "wheels")
    site = f"{VENV}/lib/python3.11/site-packages"
    torch_before = fleet.ssh(host, f"stat -c %.9Y {site}/torch/__init__.py").stdout

    run = run_playbook(fleet, PLAYBOOK, extra_vars={**VALUES, "hostcheck_wheel": wheel})
    assert run.returncode == 0, run.stderr + str(run.messages(host.name))
    assert run.changed(host.name) == 2  # the wheel copied, hostcheck reinstalled
    assert "rebuilt-for-test" in fleet.ssh(host, f"cat {site}/hostcheck/__init__.py").stdout

    back = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert back.returncode == 0 and back.changed(host.name) == 2
    assert "rebuilt-for-test" not in fleet.ssh(host, f"cat {site}/hostcheck/__init__.py").stdout
    assert fleet.ssh(host, f"stat -c %.9Y {site}/torch/__init__.py").stdout == torch_before


def test_switched_off_it_does_nothing(fleet, converged, fast):
    (host,) = fleet.hosts()
    before = state(fleet, host)
    run = run_playbook(fleet, PLAYBOOK, extra_vars={**fast, "hostcheck_enabled": False})
    assert run.returncode == 0 and run.changed(host.name) == 0
    assert state(fleet, host) == before


def test_check_diff_on_a_fresh_host_changes_nothing_and_says_why_it_does_not_run(make_fleet, fast):
    fresh = make_fleet("hostcheck-check", hosts=1)
    (host,) = fresh.hosts()
    before = state(fresh, host)
    run = run_playbook(fresh, PLAYBOOK, extra_vars=fast, check=True, diff=True)
    assert run.returncode == 0, run.stderr + str(run.messages(host.name))
    assert state(fresh, host) == before
    assert "No such file" in before  # nothing of the role's there
    said = run.task_results(SAY_WHY)[host.name]["msg"]
    assert f"it is not installed in {VENV} yet" in said
    assert f"{VENV}/bin/hostcheck run --profile default" in said


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"hostcheck_enabled": "maybe"}, "hostcheck_enabled"),
        ({"hostcheck_fail_on": "error"}, "hostcheck_fail_on"),
        ({"hostcheck_profile": "gpu_node"}, "hostcheck_profile: one of default, gpu-node"),
        ({"hostcheck_venv": "venvs/train"}, "hostcheck_venv: an absolute path"),
        ({"hostcheck_report_dir": "/"}, "hostcheck_report_dir: an absolute path"),
        ({"hostcheck_config": {"checks": {"shmm": {}}}}, "hostcheck_config: a mapping"),
        (
            {"hostcheck_config": {"checks": {"shm": {"min_size": "150%"}}}},
            "hostcheck_config: shm.min_size: percentage must be in (0, 100]",
        ),
        ({"hostcheck_extra_args": ["--user trainer"]}, "hostcheck_extra_args: one argument"),
        ({"hostcheck_extra_args": ["--profile", "quick"]}, "hostcheck_extra_args: one argument"),
        (
            {"hostcheck_wheel": "/nonexistent/hostcheck-9.9-py3-none-any.whl"},
            "hostcheck_wheel: no such wheel",
        ),
        (
            {"hostcheck_wheel": "", "hostcheck_build_source": "/tmp"},
            "hostcheck_build_source: no pyproject.toml",
        ),
    ],
)
def test_bad_input_fails_before_any_change(fleet, converged, fast, variables, message):
    (host,) = fleet.hosts()
    before = state(fleet, host)
    run = run_playbook(fleet, PLAYBOOK, extra_vars={**fast, **variables})
    assert run.returncode != 0
    text = " ".join(run.messages(host.name)) + run.stderr
    assert message in text
    assert run.changed(host.name) == 0
    assert state(fleet, host) == before


def checks_of(report: dict) -> dict[str, dict]:
    return {check["id"]: check for check in report["checks"]}


# Last in the module: it leaves its own hostcheck_config on the host.
def test_a_no_op_run_keeps_the_measurements_and_a_drifted_host_is_measured_and_failed(
    fleet, converged, fast
):
    (host,) = fleet.hosts()
    # a bare host has no PIL, so the loop's samples are calibrated CPU work instead of JPEGs
    busy = merged(
        fast, {"hostcheck_config": {"checks": {"loop": {"sample": "busy", "seconds": 1}}}}
    )
    first = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
    assert first.returncode == 0, first.stderr
    report = read_json(fleet, host, REPORT)
    measured = checks_of(report)["loop"]
    assert measured["status"] in ("pass", "warn") and measured["duration_s"] > 0, measured
    assert "measured_at" not in measured["data"]  # the config changed: measured

    second = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
    assert second.returncode == 0, second.stderr
    assert second.changed(host.name) == 0, second.changed_tasks(host.name)
    kept = checks_of(read_json(fleet, host, REPORT))["loop"]
    assert kept["data"]["measured_at"] == report["started_at"]
    assert kept["status"] == measured["status"] and kept["duration_s"] == 0
    assert kept["findings"] == measured["findings"]

    size = fleet.ssh(host, "df -B1 --output=size /dev/shm | tail -1").stdout.strip()
    # drift: /dev/shm remounted under the 32 MiB hostcheck_config asks for
    assert fleet.ssh(host, "mount -o remount,size=16M /dev/shm").returncode == 0
    try:
        drifted = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
        report = read_json(fleet, host, REPORT)
    finally:
        fleet.ssh(host, f"mount -o remount,size={size} /dev/shm")
    assert drifted.returncode != 0 and drifted.failed_hosts() == [host.name]
    (message,) = drifted.messages(host.name)
    assert "- shm [fail]: " in message
    loop = checks_of(report)["loop"]
    assert "measured_at" not in loop["data"] and loop["duration_s"] > 0  # measured again
