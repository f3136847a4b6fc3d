"""What a repair may do about a host's failing checks (hostcheck.health.repair, `hostcheck repair
plan|record`): the checks' own results and remedies decide; a role's variable named in a
remedy runs that role, a fault a GPU reset or a reboot clears asks for a reboot, the rest and a
cause repaired within the window go to a person."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostcheck.checks import gpu, shm
from hostcheck.commands.repair import DEFAULT_WINDOW_DAYS as WEEK
from hostcheck.health import repair, state
from hostcheck.model import CheckResult, Finding, Status
from tests.support.fake_nvml import fake_nvml
from tests.unit.hostcheck.checks.test_gpu import config as gpu_config
from tests.unit.hostcheck.checks.test_gpu import eight
from tests.unit.hostcheck.checks.test_gpu_faults import XID_79, add_kmsg, node  # noqa: F401
from tests.unit.hostcheck.checks.test_shm import config as shm_config
from tests.unit.hostcheck.checks.test_shm import docker_like  # noqa: F401

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.timezone.utc)


def report(*results: CheckResult) -> dict:
    return {"checks": [r.to_dict() for r in results]}


def by_key(plan: repair.Plan) -> dict[str, repair.Cause]:
    return {c.key: c for c in plan.causes}


def test_a_small_dev_shm_is_the_shm_roles_and_nothing_else(docker_like):  # noqa: F811
    small = shm.run(docker_like.context(shm_config("50%")))
    plan = repair.plan(report(small), [], NOW, WEEK)
    assert list(by_key(plan)) == ["shm.size"]
    cause = by_key(plan)["shm.size"]
    assert (cause.fix, cause.roles, cause.shown) == ("role", ["shm"], "size 64.0 MiB")
    assert (plan.roles, plan.reboot, plan.for_a_person) == (["shm"], False, [])


def test_gpu_faults_a_reset_or_reboot_clears_ask_for_a_reboot_the_rest_for_a_person(node):  # noqa: F811
    gpus = eight()
    gpus[2].remapped_rows = (0, 1, 1, 0)  # a remap pending: a GPU reset clears it
    gpus[5].remapped_rows = (0, 1, 0, 1)  # a remap failed: the GPU is replaced
    add_kmsg(node, XID_79)  # gpu2 fell off the bus: a reboot clears it
    faults = gpu.run_with(node.context(gpu_config()), fake_nvml(gpus))
    causes = by_key(repair.plan(report(faults), [], NOW, WEEK))
    assert causes["gpu.gpu2 row remapping"].fix == "reboot"
    assert causes["gpu.gpu2 xid"].fix == "reboot"
    assert causes["gpu.gpu5 row remapping"].fix == "person"
    assert causes["gpu.gpu5 row remapping"].remedy.startswith("not fixable by a role variable")
    plan = repair.plan(report(faults), [], NOW, WEEK)
    assert (plan.roles, plan.reboot) == ([], True)
    assert [c.key for c in plan.for_a_person] == ["gpu.gpu5 row remapping"]


def test_a_driver_nvml_cannot_load_is_a_reboot_and_no_driver_the_driver_role(node):  # noqa: F811
    mismatch = gpu.run_with(node.context(gpu_config()), fake_nvml(eight(), init_error=18))
    assert by_key(repair.plan(report(mismatch), [], NOW, WEEK))["gpu.driver"].fix == "reboot"
    absent = gpu.run_with(node.context(gpu_config()), fake_nvml(eight(), init_error=9))
    cause = by_key(repair.plan(report(absent), [], NOW, WEEK))["gpu.driver"]
    assert (cause.fix, cause.roles) == ("role", ["nvidia_driver"])


def test_a_remedy_naming_no_role_variable_and_a_check_failing_whole_go_to_a_person():
    ram = CheckResult(
        "memory",
        Status.FAIL,
        "ram 1.0 GiB",
        findings=[
            Finding("ram", Status.FAIL, 1 << 30, ">= 2.0 GiB", "1.0 GiB", "", "use a larger host")
        ],
    )
    whole = CheckResult("pillow", Status.FAIL, "PIL is not importable", remedy="see the log")
    passing = CheckResult("cpu", Status.PASS, "ok")
    plan = repair.plan(report(ram, whole, passing), [], NOW, WEEK)
    assert [(c.key, c.fix) for c in plan.causes] == [("memory.ram", "person"), ("pillow", "person")]
    assert by_key(plan)["pillow"].shown == "PIL is not importable"


def test_a_cause_repaired_within_the_window_goes_to_a_person(docker_like):  # noqa: F811
    small = shm.run(docker_like.context(shm_config("50%")))
    two_days = [{"at": "2026-11-27T12:00:00Z", "action": "repaired", "causes": ["shm.size"]}]
    plan = repair.plan(report(small), two_days, NOW, WEEK)
    assert by_key(plan)["shm.size"].repaired_before == "2026-11-27T12:00:00Z"
    assert (plan.roles, [c.key for c in plan.for_a_person]) == ([], ["shm.size"])
    eight_days = [{"at": "2026-11-21T11:00:00Z", "action": "repaired", "causes": ["shm.size"]}]
    assert repair.plan(report(small), eight_days, NOW, WEEK).roles == ["shm"]
    drained = [{"at": "2026-11-28T12:00:00Z", "action": "drained", "causes": ["shm.size"]}]
    assert repair.plan(report(small), drained, NOW, WEEK).roles == ["shm"]  # a drain is no repair


def test_roles_of_a_remedy_take_the_longest_role_name():
    assert repair.roles_of("set sysctl_tuning_settings (role sysctl_tuning) and run") == [
        "sysctl_tuning"
    ]
    assert repair.roles_of("set shm_size (role shm) and ulimits_nofile (role ulimits)") == [
        "shm",
        "ulimits",
    ]
    assert repair.roles_of("not fixable by a role variable: replace the GPU") == []


def hostcheck(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hostcheck", "repair", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_plans_records_a_repair_and_plans_again(docker_like, tmp_path):  # noqa: F811
    small = shm.run(docker_like.context(shm_config("50%")))
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report(small)))
    where = ("--state-dir", str(tmp_path / "state"))
    done = hostcheck("plan", "--report", str(path), *where)
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)
    assert (first["roles"], first["reboot"], first["for_a_person"]) == (["shm"], False, [])
    assert first["causes"][0]["key"] == "shm.size"

    done = hostcheck("record", "--cause", "shm.size", *where)
    assert done.returncode == 0, done.stderr
    kept = json.loads((tmp_path / "state" / "state.json").read_text())
    assert [(e["action"], e["causes"]) for e in kept["history"]] == [("repaired", ["shm.size"])]
    assert kept["counts"]["repaired"] == 1

    again = json.loads(hostcheck("plan", "--report", str(path), *where).stdout)
    assert (again["roles"], again["for_a_person"]) == ([], ["shm.size"])
    assert hostcheck("plan", "--report", str(path), "--window-days", "0", *where).returncode == 0


def test_a_file_that_is_no_report_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text('{"kind": "something else"}')
    done = hostcheck("plan", "--report", str(bad), "--state-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"hostcheck: error: --report {bad}: not a hostcheck report (no checks)"
    ]
    missing = hostcheck("plan", "--report", str(tmp_path / "none.json"), "--state-dir", "/x")
    assert missing.returncode == 2 and "cannot read it" in missing.stderr
    assert state.ACTIONS == ("drained", "resumed", "repaired")


def test_the_plan_reads_a_report_from_standard_input(docker_like, tmp_path):  # noqa: F811
    small = shm.run(docker_like.context(shm_config("50%")))
    where = ("--state-dir", str(tmp_path / "state"))
    done = hostcheck("plan", "--report", "-", *where, stdin=json.dumps(report(small)))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["roles"] == ["shm"]
    bad = hostcheck("plan", "--report", "-", *where, stdin="hostcheck: error: no report")
    assert bad.returncode == 2
    assert bad.stderr.startswith("hostcheck: error: --report -: cannot read it: ")


def scontrol(tmp_path, show_node: str, reboot_program: str = "(null)", fail: str = ""):
    """An scontrol that answers `-o show node [NAME]` and `show config` as Slurm 22.05 does,
    and writes every other call (update, reboot) to calls.log beside it."""
    program = tmp_path / "scontrol"
    program.write_text(
        "#!/bin/sh\n"
        + (f"echo '{fail}' >&2; exit 1\n" if fail else "")
        + 'if [ "$1" = show ] && [ "$2" = config ]; then\n'
        + "  echo 'Configuration data as of 2026-11-30T01:00:00'\n"
        + "  echo 'ReconfigFlags           = (null)'\n"
        + f"  echo 'RebootProgram           = {reboot_program}'\n"
        + "  exit 0\nfi\n"
        + 'if [ "$1" != -o ]; then echo "$@" >> "$(dirname "$0")/calls.log"; exit 0; fi\n'
        + 'if [ -n "$4" ]; then grep "^NodeName=$4 " <<\'EOF\'\n'
        + f"{show_node}EOF\nexit 0\nfi\n"
        + f"cat <<'EOF'\n{show_node}EOF\n"
    )
    program.chmod(0o755)
    return str(program)


def calls(tmp_path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


NODES = (
    "NodeName=node1 Arch=x86_64 State=IDLE+DRAIN Partitions=batch "
    "Reason=hostcheck: shm: size 32.0 MiB (expected >= 48.0 MiB) [root@2026-11-30T01:39:18]\n"
    "NodeName=node2 Arch=x86_64 State=IDLE+DRAIN Partitions=batch "
    "Reason=maintenance [alice@2026-11-30T01:00:00]\n"
    "NodeName=node3 Arch=x86_64 State=MIXED Partitions=batch\n"
)


def test_nodes_says_which_drains_are_hostchecks(tmp_path):
    done = hostcheck("nodes", "--scontrol", scontrol(tmp_path, NODES))
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    assert [
        (n["name"], n["drained"], n["drained_by_hostcheck"], n["reason"]) for n in read["nodes"]
    ] == [
        ("node1", True, True, "hostcheck: shm: size 32.0 MiB (expected >= 48.0 MiB)"),
        ("node2", True, False, "maintenance"),
        ("node3", False, False, ""),
    ]
    read = json.loads(hostcheck("nodes", "node2", "--scontrol", scontrol(tmp_path, NODES)).stdout)
    assert [n["name"] for n in read["nodes"]] == ["node2"]


def test_nodes_with_scontrol_failing_is_one_line_and_exit_2(tmp_path):
    failing = scontrol(
        tmp_path, NODES, fail="slurm_load_node error: Unable to contact slurm controller"
    )
    done = hostcheck("nodes", "--scontrol", failing)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "hostcheck: error: scontrol -o failed (exit 1): slurm_load_node error: Unable to contact "
        "slurm controller"
    ]


def shm_thresholds(tmp_path, min_size: str) -> list[str]:
    """hostcheck run's arguments: the shm check alone, against this machine's /dev/shm."""
    config = tmp_path / f"config-{min_size}.yaml"
    config.write_text(f"checks: {{shm: {{min_size: {min_size}, min_free: 1B}}}}\n")
    return ["--", "--profile", "quick", "--check", "shm", "--config", str(config)]


def test_verify_records_and_resumes_only_a_passing_host_hostcheck_drained(tmp_path):
    fake = scontrol(tmp_path, NODES)
    where = ("--state-dir", str(tmp_path / "state"), "--scontrol", fake)
    failing = hostcheck(
        "verify",
        "--cause",
        "shm.size",
        "--resume",
        "node1",
        *where,
        *shm_thresholds(tmp_path, "1PiB"),
    )
    assert failing.returncode == 0, failing.stderr
    read = json.loads(failing.stdout)
    assert (read["run_exit"], read["passes"], read["recorded"], read["resumed"]) == (
        1,
        False,
        [],
        False,
    )
    assert read["verdict"] == "fail"
    assert read["after"] == {"shm.size": read["after"]["shm.size"]}
    assert read["after"]["shm.size"].startswith("fail: size ")
    assert calls(tmp_path) == [] and not (tmp_path / "state" / "state.json").exists()
    # a repair that set one cause right while another still fails: that one is kept
    read = json.loads(
        hostcheck(
            "verify", "--cause", "shm.size", "--cause", "ulimits.process nofile soft", *where,
            *shm_thresholds(tmp_path, "1PiB"),
        ).stdout
    )  # fmt: skip
    assert (read["passes"], read["recorded"]) == (False, ["ulimits.process nofile soft"])
    kept = json.loads((tmp_path / "state" / "state.json").read_text())
    assert [e["causes"] for e in kept["history"]] == [["ulimits.process nofile soft"]]
    (tmp_path / "state" / "state.json").unlink()

    passing = shm_thresholds(tmp_path, "1B")
    read = json.loads(
        hostcheck("verify", "--cause", "shm.size", "--resume", "node1", *where, *passing).stdout
    )
    assert (read["passes"], read["recorded"], read["resumed"]) == (True, ["shm.size"], True)
    assert list(read["after"]) == ["shm.size"] and read["after"]["shm.size"].startswith(
        "pass: size "
    )
    assert calls(tmp_path) == ["update NodeName=node1 State=RESUME"]
    kept = json.loads((tmp_path / "state" / "state.json").read_text())
    assert [(e["action"], e["causes"]) for e in kept["history"]] == [("repaired", ["shm.size"])]

    # an admin's drain: passing is not enough
    read = json.loads(hostcheck("verify", "--resume", "node2", *where, *passing).stdout)
    assert (read["resumed"], read["node"]["reason"]) == (False, "maintenance")
    assert calls(tmp_path) == ["update NodeName=node1 State=RESUME"]
    assert hostcheck("verify", *where).returncode == 2


def test_reboot_only_through_a_reboot_program_and_never_an_admins_drain(tmp_path):
    state_dir = ("--state-dir", str(tmp_path / "state"))
    reason = ("--reason", "hostcheck: repair reboots it: gpu.gpu0 row remapping")
    cause = ("--cause", "gpu.gpu0 row remapping")
    none = scontrol(tmp_path, NODES)
    read = json.loads(
        hostcheck("reboot", "node1", *reason, *cause, *state_dir, "--scontrol", none).stdout
    )
    assert (read["rebooting"], read["why"]) == (
        False,
        "slurm.conf has no RebootProgram, so Slurm cannot do it",
    )
    assert calls(tmp_path) == []
    set_up = scontrol(tmp_path, NODES, reboot_program="/usr/local/sbin/reboot-node")
    read = json.loads(
        hostcheck("reboot", "node2", *reason, *cause, *state_dir, "--scontrol", set_up).stdout
    )
    assert (read["rebooting"], read["why"]) == (False, "drained by someone else (maintenance)")
    assert calls(tmp_path) == [] and not (tmp_path / "state" / "state.json").exists()
    read = json.loads(
        hostcheck("reboot", "node1", *reason, *cause, *state_dir, "--scontrol", set_up).stdout
    )
    assert read["rebooting"] is True
    assert calls(tmp_path) == [
        "reboot ASAP nextstate=RESUME reason=hostcheck: repair reboots it: gpu.gpu0 row remapping "
        "node1"
    ]
    kept = json.loads((tmp_path / "state" / "state.json").read_text())
    assert [(e["action"], e["causes"]) for e in kept["history"]] == [
        ("repaired", ["gpu.gpu0 row remapping"])
    ]


def test_record_waits_for_the_health_check_holding_the_state_lock(tmp_path):
    """slurmd may run the health check (which holds the lock for its whole run) while the repair
    records: the repair waits for it instead of failing."""
    folder = tmp_path / "state"
    folder.mkdir()
    lock = folder / "lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        record = subprocess.Popen(
            [sys.executable, "-m", "hostcheck", "repair", "record", "--cause", "shm.size",
             "--state-dir", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        # let go only once the record has the lock file open, so it finds the lock held
        for _ in range(600):
            if record.poll() is not None or opened(record.pid, lock):
                break
            time.sleep(0.1)
        assert record.poll() is None, record.communicate()
        assert not (folder / "state.json").exists()
    _, err = record.communicate(timeout=60)
    assert record.returncode == 0, err
    kept = json.loads((folder / "state.json").read_text())
    assert [(e["action"], e["causes"]) for e in kept["history"]] == [("repaired", ["shm.size"])]


def opened(pid: int, path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd) == str(path) for fd in fds.iterdir())
    except OSError:  # gone, or a descriptor closed while being read
        return False


def test_a_lock_held_past_the_wait_is_busy_naming_the_lock_and_the_wait(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    with open(folder / "lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waited = pytest.raises(state.Busy, match=r"holds .*/state/lock \(waited 0.3 s\)$")
        with waited, state.locked(str(folder), wait_s=0.3):
            pass
        # a health check gives up at once
        with pytest.raises(state.Busy, match=r"holds .*/state/lock$"), state.locked(str(folder)):
            pass
    with state.locked(str(folder), wait_s=0.3):
        pass
