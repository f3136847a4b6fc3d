"""The hostcheck role on sandbox hosts: installed into the training venv from a wheel built on
the controller, run with site thresholds, the report kept on the host, the host failed (with the
failing checks and their remedies) when a check fails, idempotent, and a no-op in check mode.
hostcheck runs when asked (hostcheck_measure: always), when the role installs or configures it,
or when its latest report did not pass or the host state it was made for changed: a no-op
converge does not run it, and verification proves the recorded state or runs it. Asked, it
measures the DataLoader settings file once, again only when it no longer fits, and removes it
when switched off."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import yaml

from tests.integration.ansible import build_wheel, run_playbook
from tests.integration.cases import cases_of, refusal, run_cases
from tests.sandbox.fleet import CHECKOUT

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/hostcheck/*",
    "plugins/*/hostcheck_*",
    "plugins/module_utils/*",
    "plugins/plugin_utils/systemd_quoting.py",
    "plugins/modules/root_may_run.py",
    "plugins/modules/package_manager_ready.py",
    "plugins/modules/os_packages_missing.py",
    "plugins/module_utils/dpkg_status.py",
    "hostcheck/*",
    "tests/integration/playbooks/hostcheck.yml",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/hostcheck.yml"
VENV = "/opt/venvs/train"
REPORT = "/var/lib/hostcheck/report.json"
RECORD = "/var/lib/hostcheck/report.host-state.json"
CONFIG = "/etc/hostcheck/config.yaml"
SHOW = "hostcheck : Show the verdict and the warnings"
SAY_WHY = "hostcheck : Say why hostcheck does not run in check mode"
READ = "hostcheck : Read what hostcheck needs on this host (changes nothing)"
RUN = "hostcheck : Run hostcheck"
VERIFY = "hostcheck : Verify hostcheck (changes nothing)"
SWEEP = "hostcheck : Measure the DataLoader settings (hostcheck loop --sweep --write)"
REMOVE = (
    "hostcheck : Remove the DataLoader settings file the role wrote "
    "(hostcheck_dataloader_enabled is false)"
)
SHOW_SETTINGS = "hostcheck : Show the DataLoader settings, or fail when none were written"
DATALOADER = "/etc/hostcheck/dataloader.json"
# A cheap sweep: sleep samples, 0 and 1 workers, 0.3 s per configuration (7 of them, without
# CUDA), about 10 s.
LOADER = {
    "hostcheck_dataloader_enabled": True,
    "hostcheck_dataloader_sample": "sleep",
    "hostcheck_dataloader_sample_cost_us": 1000,
    "hostcheck_dataloader_batch_size": 16,
    "hostcheck_dataloader_step_ms": 50,
    "hostcheck_dataloader_max_workers": 1,
    "hostcheck_dataloader_seconds": 0.3,
}
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
# /dev/shm and sshd's 1024 open files; the quick profile (settings only), since what these tests
# ask of the role is the same for every profile and the default one's benchmarks cost about 4
# CPU-seconds a run. The last test runs the default profile, its loop measured or kept.
VALUES = merged(
    SANDBOX_VARS,
    {
        "hostcheck_profile": "quick",
        "hostcheck_config": {
            "checks": {
                "shm": {"min_size": "32MiB", "min_free": "16MiB"},
                "ulimits": {"min_nofile_soft": 1024},
                # a check the role once refused to configure (its own copy of the check ids)
                "dataloader": {"max_age_days": 7},
            }
        },
    },
)


def state(fleet, host) -> str:
    """What the role may change on a host: files with size and mtime, the venv's packages."""
    done = fleet.ssh(
        host,
        f"stat -c '%n %s %.9Y' {REPORT} {RECORD} {CONFIG} /var/cache/hostcheck/* "
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
    assert report["profile"]["name"] == "quick"
    assert any(CONFIG in source for source in report["profile"]["sources"])
    assert report["exit_code"] == 0 and report["verdict"] == "warn"
    config = yaml.safe_load(fleet.ssh(host, f"cat {CONFIG}").stdout)
    assert config == VALUES["hostcheck_config"]
    # warnings are shown with their remedies, not fatal
    shown = converged.task_results(SHOW)[host.name]["msg"]
    assert "warnings (not fatal" in shown and "- sysctl [warn]: " in shown
    assert "remedy: set sysctl_tuning_settings" in shown

    assert converged.task_results(VERIFY)[host.name]["msg"].endswith("hostcheck passed in this run")

    # nothing changed: hostcheck is not run, its report stands, and the role says so
    second = run_playbook(fleet, PLAYBOOK, extra_vars=VALUES)
    assert second.returncode == 0, second.stderr
    assert second.changed(host.name) == 0, second.changed_tasks(host.name)
    assert second.task_results(READ)[host.name]["msg"] == (
        "nothing to install, configure or set up | hostcheck is not run: its report of "
        f"{report['started_at']} passed and nothing it checks changed since "
        "(hostcheck_measure: always runs it)"
    )
    assert not second.task_results(RUN) and not second.task_results(SHOW)
    assert read_json(fleet, host, REPORT) == report
    verified = second.task_results(VERIFY)[host.name]["msg"]
    assert "config and latest report" in verified and "as wanted" in verified
    assert verified.endswith(
        f"hostcheck's report of {report['started_at']} passed and nothing it checks changed since"
    )
    # verify.yml alone, asked: it runs hostcheck (writing nothing) and proves it passes
    alone = run_playbook(
        fleet,
        "playbooks/verify.yml",
        extra_vars={**VALUES, "hostcheck_measure": "always"},
        tags="hostcheck",
    )
    assert alone.returncode == 0, alone.stderr + str(alone.messages(host.name))
    said = alone.task_results(VERIFY)[host.name]["msg"]
    assert "hostcheck ran (hostcheck_measure is always); hostcheck passes now (" in said
    assert read_json(fleet, host, REPORT) == report


def test_check_mode_on_a_converged_host_runs_hostcheck_when_asked_and_writes_nothing(
    fleet, converged, fast
):
    (host,) = fleet.hosts()
    before = state(fleet, host)
    run = run_playbook(fleet, PLAYBOOK, extra_vars=fast, check=True, diff=True)
    assert run.returncode == 0, run.stderr
    assert run.changed(host.name) == 0
    assert "hostcheck is not run: its report of " in run.task_results(READ)[host.name]["msg"]
    assert not run.task_results(SHOW)
    asked = {**fast, "hostcheck_measure": "always"}
    run = run_playbook(fleet, PLAYBOOK, extra_vars=asked, check=True, diff=True)
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
    assert f"{VENV}/bin/hostcheck run --profile quick" in said


BAD_INPUT = [
    ({"hostcheck_enabled": "maybe"}, "hostcheck_enabled"),
    ({"hostcheck_fail_on": "error"}, "hostcheck_fail_on"),
    ({"hostcheck_profile": "gpu_node"}, "hostcheck_profile: one of default, gpu-node"),
    ({"hostcheck_venv": "venvs/train"}, "hostcheck_venv: an absolute path"),
    ({"hostcheck_report_dir": "/"}, "hostcheck_report_dir: an absolute path"),
    ({"hostcheck_config": {"checks": {"shmm": {}}}}, "hostcheck_config: shmm: unknown key"),
    (
        {"hostcheck_config": {"checks": {"shm": {"min_size": "150%"}}}},
        "hostcheck_config: shm.min_size: a percentage of RAM must be above 0% and at most 100%",
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
]


@pytest.fixture(scope="module")
def bad_input_run(fleet, converged, fast):
    """Every bad value in one run, a case each (tests/integration/cases.py)."""
    (host,) = fleet.hosts()
    before = state(fleet, host)
    return host, before, run_cases(fleet, host, PLAYBOOK, cases_of(BAD_INPUT), common=fast)


@pytest.mark.parametrize(("index", "message"), [(i, m) for i, (_, m) in enumerate(BAD_INPUT)])
def test_bad_input_fails_before_any_change(fleet, bad_input_run, index, message):
    host, before, run = bad_input_run
    assert message in refusal(run, index)
    assert state(fleet, host) == before


def checks_of(report: dict) -> dict[str, dict]:
    return {check["id"]: check for check in report["checks"]}


def test_verify_alone_proves_the_recorded_state_or_runs_hostcheck(fleet, converged, fast):
    """Without provisioning in the same run: the latest passing report stands while the host
    state it was recorded for holds; drift makes verification run hostcheck, or names it."""
    (host,) = fleet.hosts()
    converge = run_playbook(fleet, PLAYBOOK, extra_vars=fast)
    assert converge.returncode == 0, converge.stderr + str(converge.messages(host.name))
    report = read_json(fleet, host, REPORT)

    def verify():
        return run_playbook(fleet, "playbooks/verify.yml", extra_vars=fast, tags="hostcheck")

    held = verify()
    assert held.returncode == 0, held.stderr + str(held.messages(host.name))
    said = held.task_results(VERIFY)[host.name]["msg"]
    assert said.endswith(
        f"report of {report['started_at']} passed and nothing it checks changed since"
    )

    size = fleet.ssh(host, "df -B1 --output=size /dev/shm | tail -1").stdout.strip()
    # drift: /dev/shm remounted under the 32 MiB hostcheck_config asks for
    assert fleet.ssh(host, "mount -o remount,size=16M /dev/shm").returncode == 0
    try:
        drifted = verify()
    finally:
        fleet.ssh(host, f"mount -o remount,size={size} /dev/shm")
    assert drifted.returncode != 0 and drifted.failed_hosts() == [host.name]
    (message,) = drifted.messages(host.name)
    assert message == f"hostcheck run exits 1 on {host.name}: ['shm']"

    # the config file edited by hand: named, and hostcheck not run on it
    assert fleet.ssh(host, f"sed -i 's/32MiB/1TiB/' {CONFIG}").returncode == 0
    edited = verify()
    assert edited.returncode != 0
    (message,) = edited.messages(host.name)
    assert f"{CONFIG} holds " in message and '"min_size": "1TiB"' in message
    assert read_json(fleet, host, REPORT) == report  # verification wrote nothing

    repaired = run_playbook(fleet, PLAYBOOK, extra_vars=fast)
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.changed_tasks(host.name) == [
        "hostcheck.gpu_hosts.hostcheck : Write hostcheck_config (merged over the profile by "
        "hostcheck run --config)"
    ]
    assert (
        "hostcheck runs: this run installs or configures hostcheck"
        in (repaired.task_results(READ)[host.name]["msg"])
    )


def test_the_timer_is_set_up_left_alone_verified_and_removed(fleet, converged, fast):
    (host,) = fleet.hosts()
    units = "/etc/systemd/system"
    timer = {**fast, "hostcheck_timer_enabled": True}
    on = run_playbook(fleet, PLAYBOOK, extra_vars=timer)
    assert on.returncode == 0, on.stderr + str(on.messages(host.name))
    assert "Write the hostcheck service and timer units" in " ".join(on.changed_tasks(host.name))
    assert "timer: " in on.task_results(READ)[host.name]["msg"]
    assert not on.task_results(RUN)  # a timer changes nothing hostcheck checks
    for query, wanted in (("is-enabled", "enabled"), ("is-active", "active")):
        assert fleet.ssh(host, f"systemctl {query} hostcheck.timer").stdout.strip() == wanted

    again = run_playbook(fleet, PLAYBOOK, extra_vars=timer)
    assert again.returncode == 0 and again.changed(host.name) == 0, again.changed_tasks(host.name)
    assert again.task_results(READ)[host.name]["msg"].startswith(
        "nothing to install, configure or set up | "
    )
    verified = again.task_results(VERIFY)[host.name]["msg"]
    assert f"hostcheck.timer runs {VENV}/bin/hostcheck run --profile quick " in verified
    assert "hostcheck.timer is enabled and active" in verified

    hourly = f"sed -i 's/^OnCalendar=.*/OnCalendar=hourly/' {units}/hostcheck.timer"
    assert fleet.ssh(host, hourly).returncode == 0
    drifted = run_playbook(fleet, "playbooks/verify.yml", extra_vars=timer, tags="hostcheck")
    assert drifted.returncode != 0
    (message,) = drifted.messages(host.name)
    assert message.startswith(f"hostcheck_timer_enabled: the units in {units} run [")
    assert 'on "hourly", wanted [' in message and message.endswith(' on "*:0/15"')

    off = run_playbook(fleet, PLAYBOOK, extra_vars=fast)
    assert off.returncode == 0, off.stderr + str(off.messages(host.name))
    assert (
        f"timer: hostcheck.service, hostcheck.timer still in {units}"
        in (off.task_results(READ)[host.name]["msg"])
    )
    assert fleet.ssh(host, f"ls {units}/hostcheck.service {units}/hostcheck.timer").returncode != 0
    assert "no hostcheck timer, as wanted" in off.task_results(VERIFY)[host.name]["msg"]
    # the last run's series give way to one saying the timer is off on purpose (no alert)
    textfile = fleet.ssh(host, "cat /var/lib/node_exporter/textfile_collector/hostcheck.prom")
    assert textfile.stdout.splitlines()[-1] == "hostcheck_timer_enabled 0"


def test_the_dataloader_settings_file_is_measured_kept_measured_again_and_removed(
    fleet, converged, fast
):
    (host,) = fleet.hosts()
    full = f"hostcheck.gpu_hosts.{SWEEP}"
    on = {**fast, **LOADER}

    def converge(variables):
        done = run_playbook(fleet, PLAYBOOK, extra_vars=variables)
        assert done.returncode == 0, done.stderr + str(done.messages(host.name))
        return done

    def verify(variables):
        return run_playbook(fleet, "playbooks/verify.yml", extra_vars=variables, tags="hostcheck")

    # check mode says it would measure, and writes nothing
    preview = run_playbook(fleet, PLAYBOOK, extra_vars=on, check=True)
    assert preview.returncode == 0, preview.stderr + str(preview.messages(host.name))
    planned = preview.task_results(READ)[host.name]["msg"]
    assert f"dataloader: {DATALOADER} does not exist" in planned, planned
    assert fleet.ssh(host, f"ls {DATALOADER}").returncode != 0

    # (run alone, this module's first converge with the prebuilt wheel also installs it)
    first = converge(on)
    assert first.changed_tasks(host.name)[-1] == full
    said = first.task_results(READ)[host.name]["msg"]
    assert f"dataloader: {DATALOADER} does not exist | hostcheck runs: " in said, said
    written = read_json(fleet, host, DATALOADER)
    assert written["kind"] == "hostcheck-dataloader-settings" and written["schema_version"] == 1
    assert written["workload"] == {
        "sample": "sleep",
        "sample_cost_us": 1000.0,
        "image_size": 224,
        "batch_size": 16,
        "step_time_s": 0.05,
        "ranks_per_node": 1,  # 0: one per GPU, 1 without
        "dataset_path": None,
        "max_workers": 1,
    }
    names = fleet.ssh(host, "uname -n; getconf _NPROCESSORS_ONLN").stdout.split()
    assert [written["host"]["hostname"], str(written["host"]["cpus"])] == names
    loader = written["dataloader"]
    assert loader["num_workers"] in (0, 1) and loader["pin_memory"] in (True, False)
    shown = first.task_results(SHOW_SETTINGS)[host.name]["msg"]
    assert shown.startswith(
        f"settings: {DATALOADER}: DataLoader(num_workers={loader['num_workers']}, "
    )
    # the hostcheck run after it reports the file
    check = checks_of(read_json(fleet, host, REPORT))["dataloader"]
    assert check["status"] == "pass" and check["data"]["state"] == "ok", check
    assert check["data"]["num_workers"] == loader["num_workers"]
    assert check["data"]["measured_at"] == written["measured_at"]
    verified = first.task_results(VERIFY)[host.name]["msg"]
    assert f"{DATALOADER}: DataLoader(num_workers={loader['num_workers']}, " in verified

    # a no-op: the file fits the workload and the host, nothing runs
    second = converge(on)
    assert second.changed(host.name) == 0, second.changed_tasks(host.name)
    assert not second.task_results(SWEEP) and not second.task_results(RUN)
    assert second.task_results(READ)[host.name]["msg"].startswith(
        "nothing to install, configure or set up | hostcheck is not run: its report of "
    )
    assert read_json(fleet, host, DATALOADER) == written

    # another batch size: measured again
    bigger = {**on, "hostcheck_dataloader_batch_size": 32}
    resized = converge(bigger)
    assert resized.changed_tasks(host.name) == [full]
    assert resized.task_results(READ)[host.name]["msg"].startswith(
        f"dataloader: {DATALOADER} records batch_size 16, hostcheck_dataloader_batch_size "
        "gives 32 | hostcheck runs: this run measures the DataLoader settings file"
    )
    measured = read_json(fleet, host, DATALOADER)
    assert measured["workload"]["batch_size"] == 32
    assert measured["measured_at"] != written["measured_at"]

    # a broken file: measured again
    assert fleet.ssh(host, f"truncate -s 100 {DATALOADER}").returncode == 0
    repaired = converge(bigger)
    assert repaired.changed_tasks(host.name) == [full]
    said = repaired.task_results(READ)[host.name]["msg"]
    assert said.startswith(f"dataloader: {DATALOADER} is malformed: not valid JSON: "), said
    assert read_json(fleet, host, DATALOADER)["workload"]["batch_size"] == 32

    # verification: a file from another host, then none, fails it (and writes nothing)
    moved = f'sed -i \'s/"hostname": "[^"]*"/"hostname": "elsewhere"/\' {DATALOADER}'
    assert fleet.ssh(host, moved).returncode == 0
    stale = verify(bigger)
    assert stale.returncode != 0
    (message,) = stale.messages(host.name)
    assert message.startswith(
        f"hostcheck_dataloader_enabled: {DATALOADER} is stale: measured on elsewhere with "
    ), message
    assert fleet.ssh(host, f"rm {DATALOADER}").returncode == 0
    missing = verify(bigger)
    assert missing.returncode != 0
    assert missing.messages(host.name) == [
        f"hostcheck_dataloader_enabled: {DATALOADER} does not exist"
    ]
    assert fleet.ssh(host, f"ls {DATALOADER}").returncode != 0

    # switched off: the role's file is removed (measured again first), and the check skips
    converge(bigger)
    off = converge(fast)
    assert off.changed_tasks(host.name) == [f"hostcheck.gpu_hosts.{REMOVE}"]
    assert off.task_results(READ)[host.name]["msg"].startswith(
        f"dataloader: hostcheck_dataloader_enabled is false: {DATALOADER} (written by hostcheck "
        "loop --sweep --write) is removed | hostcheck runs: this run removes the DataLoader "
        "settings file"
    )
    assert fleet.ssh(host, f"ls {DATALOADER}").returncode != 0
    assert checks_of(read_json(fleet, host, REPORT))["dataloader"]["status"] == "skip"
    # a no-op costs the same tasks with the settings file as without
    idle = converge(fast)
    assert idle.changed(host.name) == 0, idle.changed_tasks(host.name)
    assert tasks_of(idle, host.name) == tasks_of(second, host.name)


def tasks_of(run, host: str) -> list[str]:
    """Every task the run had for the host, skipped ones included, in order."""
    return [
        task["task"]["name"]
        for play in run.output.get("plays", [])
        for task in play["tasks"]
        if host in task["hosts"]
    ]


# Last in the module: it leaves its own hostcheck_config on the host.
def test_hostcheck_runs_when_asked_or_when_the_host_state_drifted_not_on_a_no_op(
    fleet, converged, fast
):
    (host,) = fleet.hosts()
    # a bare host has no PIL, so the loop's samples are calibrated CPU work instead of JPEGs
    busy = merged(
        {**fast, "hostcheck_profile": "default"},
        {"hostcheck_config": {"checks": {"loop": {"sample": "busy", "seconds": 1}}}},
    )
    first = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
    assert first.returncode == 0, first.stderr
    report = read_json(fleet, host, REPORT)
    measured = checks_of(report)["loop"]
    assert measured["status"] in ("pass", "warn") and measured["duration_s"] > 0, measured
    assert "measured_at" not in measured["data"]  # the config changed: measured

    # a no-op converge: hostcheck (and its loop) is not run, the report stands
    second = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
    assert second.returncode == 0, second.stderr
    assert second.changed(host.name) == 0, second.changed_tasks(host.name)
    assert not second.task_results(RUN)
    assert "hostcheck is not run: its report of" in second.task_results(READ)[host.name]["msg"]
    assert read_json(fleet, host, REPORT) == report

    # a change hostcheck's own comparison finds harmless: the role runs it, the loop's
    # measurement of the last report stands
    note = "/etc/sysctl.d/99-hostcheck-test-note.conf"
    assert fleet.ssh(host, f"echo '# a note' > {note}").returncode == 0
    try:
        noted = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
    finally:
        fleet.ssh(host, f"rm -f {note}")
    assert noted.returncode == 0, noted.stderr
    assert noted.changed(host.name) == 0, noted.changed_tasks(host.name)
    assert noted.task_results(READ)[host.name]["msg"].endswith(
        f"hostcheck runs: changed since the report of {report['started_at']}: sysctl files"
    )
    kept = checks_of(read_json(fleet, host, REPORT))["loop"]
    assert kept["data"]["measured_at"] == report["started_at"]
    assert kept["status"] == measured["status"] and kept["duration_s"] == 0
    assert kept["findings"] == measured["findings"]

    # asked: hostcheck runs and measures, whatever changed
    asked = run_playbook(fleet, PLAYBOOK, extra_vars={**busy, "hostcheck_measure": "always"})
    assert asked.returncode == 0, asked.stderr
    assert asked.task_results(READ)[host.name]["msg"].endswith(
        "hostcheck runs: hostcheck_measure is always"
    )
    loop = checks_of(read_json(fleet, host, REPORT))["loop"]
    assert "measured_at" not in loop["data"] and loop["duration_s"] > 0

    size = fleet.ssh(host, "df -B1 --output=size /dev/shm | tail -1").stdout.strip()
    # drift: /dev/shm remounted under the 32 MiB hostcheck_config asks for
    assert fleet.ssh(host, "mount -o remount,size=16M /dev/shm").returncode == 0
    try:
        drifted = run_playbook(fleet, PLAYBOOK, extra_vars=busy)
        report = read_json(fleet, host, REPORT)
    finally:
        fleet.ssh(host, f"mount -o remount,size={size} /dev/shm")
    assert drifted.returncode != 0 and drifted.failed_hosts() == [host.name]
    assert "changed since the report of " in drifted.task_results(READ)[host.name]["msg"]
    assert "/dev/shm" in drifted.task_results(READ)[host.name]["msg"]
    (message,) = drifted.messages(host.name)
    assert "- shm [fail]: " in message
    loop = checks_of(report)["loop"]
    assert "measured_at" not in loop["data"] and loop["duration_s"] > 0  # measured again
