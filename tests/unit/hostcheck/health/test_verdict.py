"""The health verdict and what it does to a Slurm node: settings count at once, measurements
only on consecutive failures; hostcheck resumes only the drains it made."""

import pytest

from hostcheck.health import slurm
from hostcheck.health.verdict import HEALTHY, UNHEALTHY, UNKNOWN, Verdict, decide
from hostcheck.model import CheckResult, Finding, Status

# scontrol -o show node of Slurm 22.05.8 on a sandbox host, drained by an admin
SHOWN = (
    "NodeName=node2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.12 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.9.9.2 "
    "NodeHostName=node2 Port=6820 Version=22.05.8 OS=Linux 6.1.0-27-amd64 #1 SMP "
    "RealMemory=1 AllocMem=0 FreeMem=1000 Sockets=1 Boards=1 State=IDLE+DRAIN "
    "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=batch "
    "BootTime=2026-11-25T20:00:00 SlurmdStartTime=2026-11-25T20:01:00 "
    "LastBusyTime=2026-11-25T20:01:05 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a "
    "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s "
    "Reason=maintenance: swap PSU=2 [root@2026-11-25T20:02:11]\n"
)


def shm_failing():
    return CheckResult.from_findings(
        "shm",
        [
            Finding("type", Status.PASS, "tmpfs"),
            Finding("size", Status.FAIL, 32 << 20, ">= 64.0 MiB", "32.0 MiB"),
        ],
    )


def measured(status: str, at: str) -> dict:
    result = CheckResult.from_findings(
        "storage",
        [Finding("read rate", Status(status), 50e6, ">= 1.0 GB/s", "50.0 MB/s")],
    ).to_dict()
    result["data"]["measured_at"] = at
    return result


def test_a_failing_setting_makes_the_host_unhealthy_at_once_naming_only_what_failed():
    verdict = decide([shm_failing()], [], {}, "no earlier report", {}, consecutive=2)
    assert verdict.state == UNHEALTHY and verdict.exit_code == 1
    assert verdict.causes == ["shm: size 32.0 MiB (expected >= 64.0 MiB)"]
    assert "type" not in verdict.summary()


def test_a_measured_failure_counts_once_per_measurement_and_drains_on_the_consecutive_one():
    first = decide([], ["storage"], {"storage": measured("fail", "T1")}, "", {}, consecutive=2)
    assert first.state == HEALTHY
    assert first.streaks["storage"]["failures"] == 1
    assert "storage: failed 1 of the 2" in first.summary()
    # the same report read again is the same measurement: no second count
    again = decide([], ["storage"], {"storage": measured("fail", "T1")}, "", first.streaks, 2)
    assert again.state == HEALTHY and again.streaks["storage"]["failures"] == 1
    second = decide([], ["storage"], {"storage": measured("fail", "T2")}, "", again.streaks, 2)
    assert second.state == UNHEALTHY
    assert second.causes == [
        "storage: read rate 50.0 MB/s (expected >= 1.0 GB/s) (2 measurements in a row)"
    ]


def test_a_passing_measurement_ends_the_streak_and_one_that_no_longer_stands_keeps_it():
    streaks = {"storage": {"measured_at": "T1", "status": "fail", "failures": 1}}
    kept = decide([], ["storage"], {}, "the host rebooted", streaks, consecutive=2)
    assert kept.state == HEALTHY and kept.streaks == streaks
    assert kept.measurements == "no measurements stand: the host rebooted"
    passed = decide([], ["storage"], {"storage": measured("pass", "T2")}, "", streaks, 2)
    assert passed.streaks["storage"]["failures"] == 0 and not passed.watching
    after = decide([], ["storage"], {"storage": measured("fail", "T3")}, "", passed.streaks, 2)
    assert after.state == HEALTHY and after.streaks["storage"]["failures"] == 1


def test_a_check_that_could_not_assess_is_unknown_unless_another_failed():
    broken = CheckResult("gpu", Status.ERROR, "nvmlInit failed: driver/library mismatch")
    alone = decide([broken], [], {}, "", {}, consecutive=2)
    assert alone.state == UNKNOWN and alone.exit_code == 2
    assert alone.summary() == "unknown: gpu: nvmlInit failed: driver/library mismatch"
    assert decide([broken, shm_failing()], [], {}, "", {}, 2).state == UNHEALTHY


def test_scontrol_line_parsed_with_a_reason_holding_spaces_and_equals():
    node = slurm.parse_node(SHOWN)
    assert node == slurm.Node("node2", "IDLE+DRAIN", "maintenance: swap PSU=2", ("batch",))
    assert node.drained and not node.down and not node.drained_by_hostcheck
    idle = slurm.parse_node(SHOWN.replace("State=IDLE+DRAIN", "State=IDLE").split(" Reason=")[0])
    assert idle.reason == "" and not idle.drained
    with pytest.raises(slurm.SlurmError, match="no NodeName or State"):
        slurm.parse_node("Node node9 not found")


UNHEALTHY_SHM = Verdict(UNHEALTHY, causes=["shm: size 32.0 MiB (expected >= 64.0 MiB)"])
OURS = "hostcheck: shm: size 32.0 MiB (expected >= 64.0 MiB)"


@pytest.mark.parametrize(
    ("state", "reason", "verdict", "action", "said"),
    [
        ("IDLE", "", UNHEALTHY_SHM, "drain", "drained"),
        ("MIXED", "", UNHEALTHY_SHM, "drain", "drained"),
        ("IDLE+DRAIN", OURS, UNHEALTHY_SHM, "none", "stays drained"),
        ("IDLE+DRAIN", "hostcheck: sysctl: x", UNHEALTHY_SHM, "drain", "reason updated"),
        ("IDLE+DRAIN", "maintenance", UNHEALTHY_SHM, "none", "drained by someone else"),
        ("DOWN+NOT_RESPONDING", "Not responding", UNHEALTHY_SHM, "none", "left as it is"),
        ("IDLE+DRAIN", OURS, Verdict(HEALTHY), "resume", "resumed"),
        ("ALLOCATED+DRAIN", OURS, Verdict(HEALTHY), "resume", "resumed"),
        ("IDLE+DRAIN", "maintenance", Verdict(HEALTHY), "none", "left drained by someone"),
        ("DOWN+DRAIN", OURS, Verdict(HEALTHY), "none", "left as it is"),
        ("IDLE", "", Verdict(HEALTHY), "none", "IDLE, nothing to do"),
        ("IDLE+DRAIN", OURS, Verdict(UNKNOWN, unknown=["gpu: x"]), "none", "verdict is unknown"),
    ],
)
def test_the_plan_drains_and_resumes_only_what_is_hostchecks(state, reason, verdict, action, said):
    step = slurm.plan(slurm.Node("node2", state, reason), verdict)
    assert step.action == action
    assert said in step.said
    assert step.reason == (OURS if action == "drain" else "")


def test_a_long_reason_is_cut_and_keeps_the_prefix():
    verdict = Verdict(UNHEALTHY, causes=[f"sysctl: vm.setting{i} 1 < 2" for i in range(40)])
    reason = slurm.drain_reason(verdict)
    assert reason.startswith("hostcheck: sysctl: vm.setting0 1 < 2; ")
    assert len(reason) == slurm.REASON_LENGTH and reason.endswith("...")
