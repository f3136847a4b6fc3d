"""The sysctl_tuning role on sandbox hosts. They boot systemd in a container on this machine's
kernel (read-only /proc/sys and /sys): the role must see that, write its sysctl.d file, apply
nothing live, leave the governor and THP alone and say why, and its boot units must be enabled
yet skipped by systemd at every boot, not failed; and this machine's sysctls and THP modes
must be exactly as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.integration.ansible import run_playbook
from tests.integration.cases import cases_of, refusal, run_cases
from tests.support.os_vars import LOAD_OS_VARS_TASK, READ_FACTS_TASK

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/sysctl_tuning/*",
    "plugins/*/sysctl_tuning*",
    "plugins/module_utils/sysctl.py",
    "plugins/module_utils/thp.py",
    "plugins/module_utils/cpus.py",
    "plugins/module_utils/host_files.py",
    "tests/integration/playbooks/sysctl_tuning.yml",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/sysctl_tuning.yml"
ROLE = Path(__file__).resolve().parents[2] / "roles" / "sysctl_tuning"
FILE = "/etc/sysctl.d/90-hostcheck-training.conf"
SETTINGS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["sysctl_tuning_settings"]
HEADER = [
    "# Kernel tunables for PyTorch training hosts, from sysctl_tuning_settings (Ansible role",
    "# sysctl_tuning). Lines here are rewritten by the role; change the variable instead.",
]
EXPECTED_LINES = [*HEADER, *(f"{k}={' '.join(str(v).split())}" for k, v in SETTINGS.items())]
# main.yml's validation (the last task of that name) says what is not applied here, and why
VALIDATE_TASK = "sysctl_tuning : Validate the variables"
TUNE_TASK = "sysctl_tuning : Tune the kernel (only what the validation found to change)"
VERIFY_TASK = "sysctl_tuning : Verify the kernel tunables, CPU governor and THP (changes nothing)"
# the check of meta/argument_specs.yml that Ansible puts before main.yml's tasks (`roles:`)
ARGUMENT_SPEC_TASK = "sysctl_tuning : Validating arguments against arg spec"


def machine_state() -> dict[str, str]:
    """This machine's values of everything the role could touch (read on the controller)."""
    state = {}
    for name in [*SETTINGS, "vm.dirty_ratio", "vm.overcommit_memory"]:
        path = Path("/proc/sys") / name.replace(".", "/")
        state[name] = " ".join(path.read_text().split())
    for which in ("enabled", "defrag"):
        state[f"thp {which}"] = Path(f"/sys/kernel/mm/transparent_hugepage/{which}").read_text()
    for governor in sorted(Path("/sys/devices/system/cpu").glob("cpu*/cpufreq/scaling_governor")):
        state[str(governor)] = governor.read_text()
    return state


@pytest.fixture(scope="module", autouse=True)
def this_machine_untouched():
    before = machine_state()
    yield before
    assert machine_state() == before, "the sysctl_tuning tests changed this machine's kernel"


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("sysctl_tuning", hosts=1)


def file_lines(fleet, host) -> list[str] | None:
    done = fleet.ssh(host, f"cat {FILE}")
    return done.stdout.splitlines() if done.returncode == 0 else None


def run(fleet, **options):
    return run_playbook(fleet, PLAYBOOK, **options)


def role_tasks(done, host) -> list[tuple[str, str]]:
    """(task, ok/changed/skipped/failed) of every task of the role's files that ran for the
    host (not Ansible's argument spec check, which depends on how the play calls the role)."""
    found = []
    for play in done.output.get("plays", []):
        for task in play["tasks"]:
            result = task["hosts"].get(host.name)
            name = task["task"]["name"].removeprefix("hostcheck.gpu_hosts.")
            if result is None or not name.startswith("sysctl_tuning : "):
                continue
            if name.startswith(ARGUMENT_SPEC_TASK):
                continue
            status = [s for s in ("failed", "skipped", "changed") if result.get(s)]
            found.append((name, (status or ["ok"])[0]))
    return found


def test_detects_the_shared_kernel_persists_and_changes_nothing_live(fleet):
    (host,) = fleet.hosts()
    live_before = fleet.ssh(host, "sysctl -n vm.swappiness vm.max_map_count").stdout

    first = run(fleet)
    assert first.returncode == 0, first.stderr
    # the header, the lines (one loop); the THP unit written and enabled
    assert first.changed(host.name) == 4
    message = first.task_results(VALIDATE_TASK)[host.name]["msg"]
    assert "/run/systemd/container says systemd-nspawn" in message
    assert "/proc/sys is read-only" in message and "/sys is read-only" in message
    assert "Skipped: live sysctl values" in message
    assert "at boot only by units that systemd skips in a container" in message
    assert file_lines(fleet, host) == EXPECTED_LINES
    assert fleet.ssh(host, "sysctl -n vm.swappiness vm.max_map_count").stdout == live_before
    units = fleet.ssh(
        host, "ls /etc/systemd/system/hostcheck-* /etc/tuned/hostcheck-training 2>/dev/null"
    )
    # no cpufreq in this VM: only the THP unit
    assert units.stdout.split() == ["/etc/systemd/system/hostcheck-thp.service"]

    verified = first.task_results(VERIFY_TASK)[host.name]
    assert "not verified, because the role does not set them here" in verified["msg"]
    assert "the live sysctl values" in verified["msg"]
    assert f"{FILE} holds the {len(SETTINGS)} settings" in verified["msg"]

    second = run(fleet)
    assert second.returncode == 0, second.stderr
    assert second.changed(host.name) == 0
    # nothing to change: the validation (the validate play's, then main.yml's, each after
    # loading the OS's vars; main.yml's facts read by the play), one skipped include, verify
    assert role_tasks(second, host) == [
        (f"sysctl_tuning : {LOAD_OS_VARS_TASK}", "ok"),
        (VALIDATE_TASK, "ok"),
        (f"sysctl_tuning : {READ_FACTS_TASK}", "skipped"),
        (f"sysctl_tuning : {LOAD_OS_VARS_TASK}", "ok"),
        (VALIDATE_TASK, "ok"),
        (TUNE_TASK, "skipped"),
        (VERIFY_TASK, "ok"),
    ]
    assert "Skipped: live sysctl values" in second.task_results(VALIDATE_TASK)[host.name]["msg"]


def unit_state(fleet, host, unit: str) -> dict[str, str]:
    """Whether the unit is enabled, its state, and whether systemd checked its conditions in
    this boot (a condition timestamp) and found them unmet."""
    done = fleet.ssh(
        host,
        f"echo Enabled=$(systemctl is-enabled {unit}); systemctl show -p ActiveState -p Result "
        f"-p ConditionResult -p ConditionTimestampMonotonic {unit}",
    )
    state = dict(line.split("=", 1) for line in done.stdout.split())
    state["Checked"] = "yes" if int(state.pop("ConditionTimestampMonotonic") or 0) else "no"
    return state


def test_boot_units_are_enabled_and_skipped_by_systemd_at_every_boot(fleet):
    """In a container the THP unit is enabled but systemd skips it (condition unmet) when
    started and at boot: nothing touches the shared kernel, and no unit is left failed.

    The journal says so for the start by hand. At boot systemd's own state is the proof (the
    condition checked in this boot, unmet): PID 1 logs to the journal only once journald runs,
    and this unit (Before=sysinit.target) can come first; in a container its message then goes
    to the console. One full run under load read no entry there."""
    (host,) = fleet.hosts()
    assert run(fleet).returncode == 0
    unit = "hostcheck-thp.service"
    skipped = {
        "Enabled": "enabled",
        "ActiveState": "inactive",
        "Result": "success",
        "ConditionResult": "no",
        "Checked": "yes",
    }
    started = fleet.ssh(host, f"systemctl start {unit}")
    assert started.returncode == 0, started.stderr
    assert unit_state(fleet, host, unit) == skipped
    # journald takes PID 1's message in its own time: up to 30 s
    said = "was skipped because of an unmet condition check"
    logged = fleet.ssh(
        host,
        f"for i in $(seq 60); do journalctl -b --no-pager -u {unit} | grep -q '{said}' && exit 0;"
        f" sleep 0.5; done; journalctl -b --no-pager -u {unit}; exit 1",
    )
    assert logged.returncode == 0, logged.stdout
    fleet.reboot(host)
    assert unit_state(fleet, host, unit) == skipped
    assert fleet.ssh(host, "systemctl --failed --no-legend --plain").stdout.strip() == ""
    assert run(fleet, tags="verify").returncode == 0


def test_names_left_out_or_null_leave_the_file(fleet):
    (host,) = fleet.hosts()
    extra = run(fleet, extra_vars={"sysctl_tuning_settings": {**SETTINGS, "vm.dirty_ratio": 30}})
    assert extra.returncode == 0, extra.stderr
    assert "vm.dirty_ratio=30" in file_lines(fleet, host)
    fewer = run(fleet, extra_vars={"sysctl_tuning_settings": {**SETTINGS, "vm.swappiness": None}})
    assert fewer.returncode == 0, fewer.stderr
    lines = file_lines(fleet, host)
    assert not any(line.startswith(("vm.dirty_ratio", "vm.swappiness")) for line in lines)
    assert "vm.max_map_count=262144" in lines
    none = run(fleet, extra_vars={"sysctl_tuning_settings": {}})
    assert none.returncode == 0, none.stderr
    assert file_lines(fleet, host) is None  # no settings: no file
    back = run(fleet)
    assert back.returncode == 0 and file_lines(fleet, host) == EXPECTED_LINES


def test_verify_notices_an_edited_file_and_the_role_repairs_it(fleet):
    (host,) = fleet.hosts()
    assert run(fleet).returncode == 0
    fleet.ssh(host, f"sed -i 's/^vm.swappiness=10$/vm.swappiness=60/' {FILE}")
    verify = run(fleet, tags="verify")
    assert verify.returncode != 0
    assert '"vm.swappiness": "60"' in verify.failure_text(host.name)
    repair = run(fleet)
    assert repair.returncode == 0, repair.stderr
    assert repair.changed(host.name) == 1
    assert file_lines(fleet, host) == EXPECTED_LINES


def test_a_disabled_boot_unit_fails_verification_and_the_role_enables_it(fleet):
    (host,) = fleet.hosts()
    assert run(fleet).returncode == 0
    fleet.ssh(host, "systemctl disable hostcheck-thp.service")
    verify = run(fleet, tags="verify")
    assert verify.returncode != 0
    assert (
        "/etc/systemd/system/hostcheck-thp.service is missing or not enabled (sysinit.target.wants)"
        in verify.failure_text(host.name)
    )
    repair = run(fleet)
    assert repair.returncode == 0, repair.stderr
    assert [name for name, status in role_tasks(repair, host) if status == "changed"] == [
        "sysctl_tuning : Enable and start the boot units (in a container they skip themselves)"
    ]
    assert unit_state(fleet, host, "hostcheck-thp.service")["Enabled"] == "enabled"


def test_an_edited_boot_unit_is_written_again(fleet):
    """The unit's text differs from the template's: the validation finds it, the role writes
    it again (and systemd reloads it); the next run has nothing to do."""
    (host,) = fleet.hosts()
    unit = "/etc/systemd/system/hostcheck-thp.service"
    original = fleet.ssh(host, f"cat {unit}").stdout
    fleet.ssh(host, f"sed -i 's/^Description=.*/Description=edited/' {unit} && chmod 0600 {unit}")
    repair = run(fleet)
    assert repair.returncode == 0, repair.stderr
    changed = [name for name, status in role_tasks(repair, host) if status == "changed"]
    assert "sysctl_tuning : Write the boot units" in changed
    assert fleet.ssh(host, f"cat {unit}").stdout == original
    assert fleet.ssh(host, f"stat -c %a {unit}").stdout.strip() == "644"
    again = run(fleet)
    assert again.returncode == 0 and again.changed(host.name) == 0
    assert (TUNE_TASK, "skipped") in role_tasks(again, host)


def test_a_file_read_after_ours_at_boot_fails_verification(fleet):
    """/etc/sysctl.d/99-*.conf and /etc/sysctl.conf are read after 90-hostcheck-training.conf:
    a value there wins at the next boot, so the role warns and verify fails naming it."""
    (host,) = fleet.hosts()
    fleet.ssh(host, "echo 'vm.swappiness = 60' > /etc/sysctl.d/99-local.conf")
    try:
        done = run(fleet)
        assert done.returncode != 0
        warned = done.task_results(VALIDATE_TASK)[host.name]["msg"]
        assert "vm.swappiness: /etc/sysctl.d/99-local.conf sets 60 and is read after" in warned
        assert (
            "vm.swappiness: the next boot ends with 60 from /etc/sysctl.d/99-local.conf"
            in done.failure_text(host.name)
        )
        assert done.changed(host.name) == 0
    finally:
        fleet.ssh(host, "rm -f /etc/sysctl.d/99-local.conf")
    assert run(fleet, tags="verify").returncode == 0


def test_switched_off(fleet):
    (host,) = fleet.hosts()
    before = file_lines(fleet, host)
    done = run(fleet, extra_vars={"sysctl_tuning_enabled": False})
    assert done.returncode == 0, done.stderr
    assert done.changed(host.name) == 0
    said = done.task_results(VALIDATE_TASK)[host.name]["msg"]
    assert said == "sysctl_tuning_enabled is false: sysctls, CPU governor and THP left as they are"
    assert done.task_results(VERIFY_TASK)[host.name]["msg"] == (
        "sysctl_tuning_enabled is false: not verified"
    )
    assert file_lines(fleet, host) == before


def test_check_diff_on_a_fresh_host_changes_nothing(make_fleet):
    fresh = make_fleet("sysctl_tuning-check", hosts=1)
    (host,) = fresh.hosts()
    done = run(fresh, check=True, diff=True)
    assert done.returncode == 0, done.stderr
    assert done.changed(host.name) == 3  # would write the header, the lines and the THP unit
    assert file_lines(fresh, host) is None


BAD_INPUT = [
    ({"sysctl_tuning_cpu_governor": "turbo"}, "sysctl_tuning_cpu_governor"),
    ({"sysctl_tuning_thp_enabled": "sometimes"}, "sysctl_tuning_thp_enabled"),
    ({"sysctl_tuning_thp_defrag": "defer+never"}, "sysctl_tuning_thp_defrag"),
    ({"sysctl_tuning_enabled": "maybe"}, "sysctl_tuning_enabled"),
    ({"sysctl_tuning_file": "/etc/sysctl.conf"}, "sysctl_tuning_file: a file directly in"),
    ({"sysctl_tuning_settings": "vm.swappiness=5"}, "sysctl_tuning_settings"),
    ({"vm/swappiness": 5}, "sysctl_tuning_settings['vm/swappiness']: not a sysctl name"),
    ({"vm.max_map_count": True}, "['vm.max_map_count']: a boolean"),
    ({"vm.max_map_count": "lots"}, "['vm.max_map_count']: expected an integer"),
    ({"vm.max_map_count": "0x40000"}, "['vm.max_map_count']: expected an integer"),
    ({"net.ipv4.tcp_rmem": 16777216}, "['net.ipv4.tcp_rmem']: expected 3 integers"),
    ({"vm.no_such_knob": 1}, "['vm.no_such_knob']: not a sysctl of this host's kernel"),
    ({"kernel.random.boot_id": "x"}, "['kernel.random.boot_id']: a read-only sysctl"),
]


def bad_case(variables: dict) -> dict:
    """A bad value beside a good change (vm.swappiness 5) that must not be made."""
    role_vars = {k: v for k, v in variables.items() if k.startswith("sysctl_tuning_")}
    sysctls = {k: v for k, v in variables.items() if not k.startswith("sysctl_tuning_")}
    return {"sysctl_tuning_settings": {**SETTINGS, "vm.swappiness": 5, **sysctls}, **role_vars}


@pytest.fixture(scope="module")
def bad_input_run(fleet):
    """Every bad value in one run, a case each (tests/integration/cases.py)."""
    (host,) = fleet.hosts()
    before = file_lines(fleet, host)
    assert before == EXPECTED_LINES  # as the tests above leave it
    cases = {case: bad_case(variables) for case, variables in cases_of(BAD_INPUT).items()}
    return host, before, run_cases(fleet, host, PLAYBOOK, cases)


@pytest.mark.parametrize(("index", "message"), [(i, m) for i, (_, m) in enumerate(BAD_INPUT)])
def test_bad_input_fails_before_any_change(fleet, bad_input_run, index, message):
    host, before, done = bad_input_run
    assert message in refusal(done, index)
    assert file_lines(fleet, host) == before
