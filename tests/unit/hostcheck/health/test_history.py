"""The health check's history of its own drains and resumes (state.json "history" and "counts";
hostcheck_healthcheck_actions_total in its textfile): what a repair and a person read to see
how often a node went out, and why."""

from __future__ import annotations

import datetime as dt
import json

from prometheus_client.parser import text_string_to_metric_families

from hostcheck.health import slurm, state
from hostcheck.health.verdict import Verdict, cause_keys, decide
from hostcheck.model import CheckResult, Finding, Status
from tests.unit.hostcheck.health.test_command import healthcheck, place  # noqa: F401
from tests.unit.hostcheck.health.test_drain_cap import SICK, FakeScontrol, node

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.timezone.utc)


def test_a_drain_is_kept_with_its_causes_and_a_resume_names_the_drain_it_ends():
    history, counts = state.recorded({}, "drained", ["shm.size"], NOW)
    assert history == [{"at": "2026-11-29T12:00:00Z", "action": "drained", "causes": ["shm.size"]}]
    assert counts == {"drained": 1, "resumed": 0, "repaired": 0}
    kept = {"history": history, "counts": counts}
    later = NOW + dt.timedelta(minutes=5)
    history, counts = state.recorded(kept, "resumed", [], later)
    assert history[-1] == {
        "at": "2026-11-29T12:05:00Z",
        "action": "resumed",
        "causes": ["shm.size"],
    }
    assert counts == {"drained": 1, "resumed": 1, "repaired": 0}
    # a run that changed nothing keeps both as they are
    assert state.recorded({"history": history, "counts": counts}, "", ["x.y"], later) == (
        history,
        counts,
    )


def test_the_history_keeps_thirty_days_and_a_hundred_entries_and_the_counts_go_on():
    old = [
        {"at": f"2026-10-{day:02d}T00:00:00Z", "action": "drained", "causes": ["shm.size"]}
        for day in range(1, 32)
    ]
    history, counts = state.recorded({"history": old, "counts": {"drained": 31}}, "", [], NOW)
    assert [e["at"] for e in history] == ["2026-10-31T00:00:00Z"]  # 29.5 days before NOW
    assert counts == {"drained": 31, "resumed": 0, "repaired": 0}
    many = [
        {"at": f"2026-11-29T11:{m:02d}:00Z", "action": "drained", "causes": []} for m in range(60)
    ]
    many += [
        {"at": f"2026-11-29T10:{m:02d}:00Z", "action": "resumed", "causes": []} for m in range(60)
    ]
    many.sort(key=lambda e: e["at"])
    history, _ = state.recorded({"history": many}, "drained", ["gpu.gpu0 xid"], NOW)
    assert len(history) == state.HISTORY_LENGTH
    assert history[-1]["causes"] == ["gpu.gpu0 xid"] and history[0]["at"] == "2026-11-29T10:21:00Z"


def test_entries_that_are_not_the_health_checks_are_dropped_not_fatal():
    strange = {"at": "2026-11-29T11:00:00Z", "action": "rebooted", "causes": []}
    junk = {"history": ["x", {"at": 1}, strange]}
    assert state.recorded(junk, "", [], NOW) == ([], {"drained": 0, "resumed": 0, "repaired": 0})


def test_causes_are_the_failing_findings_and_stay_put_while_values_change():
    def shm(size: int) -> CheckResult:
        return CheckResult(
            "shm",
            Status.FAIL,
            f"size {size}",
            findings=[
                Finding("type", Status.PASS, "tmpfs"),
                Finding("size", Status.FAIL, size, display=f"{size} B"),
            ],
        )

    assert cause_keys(shm(1)) == cause_keys(shm(2)) == ["shm.size"]
    assert cause_keys(CheckResult("gpu", Status.FAIL, "no NVML")) == ["gpu"]
    verdict = decide([shm(1), CheckResult("cpu", Status.PASS, "ok")], [], {}, "", {}, 2)
    assert (verdict.state, verdict.cause_keys) == ("unhealthy", ["shm.size"])


def test_act_says_drained_only_for_a_new_drain_and_resumed_for_a_resume():
    fresh = FakeScontrol([node("node1"), node("node2")])
    assert slurm.act(fresh, "node2", SICK).done == "drained"
    again = FakeScontrol([node("node2", "IDLE+DRAIN", "hostcheck: old")])
    assert slurm.act(again, "node2", SICK).done == ""  # a reason updated: no new drain
    back = FakeScontrol([node("node2", "IDLE+DRAIN", "hostcheck: old")])
    acted = slurm.act(back, "node2", Verdict("healthy"))
    assert (acted.done, back.updates) == ("resumed", [("resume", "node2")])
    dry = FakeScontrol([node("node1"), node("node2")])
    assert slurm.act(dry, "node2", SICK, dry_run=True).done == ""
    assert dry.updates == []


SCONTROL = """#!/bin/sh
# node2 as the controller sees it: STATE and REASON below; updates are appended to $0.updates
if [ "$1 $2" = "-o show" ]; then
  echo "NodeName=node2 State=STATE Partitions=gpu Reason=REASON"
else
  echo "$@" >> "$0.updates"
fi
"""


def test_the_command_keeps_a_drain_and_its_resume_and_counts_them_in_its_textfile(place):  # noqa: F811
    scontrol = place["tmp"] / "scontrol"
    textfile = place["tmp"] / "healthcheck.prom"
    failing = place["tmp"] / "shm-fails.yaml"
    failing.write_text(
        (place["tmp"] / "config.yaml")
        .read_text()
        .replace("shm: {min_size: 1MiB", "shm: {min_size: 1PiB")
    )
    slurm_args = ("--slurm", "--node", "node2", "--scontrol", str(scontrol))
    slurm_args += ("--max-drained", "0", "--textfile", str(textfile))

    def controller(node_state: str, reason: str) -> None:
        scontrol.write_text(SCONTROL.replace("STATE", node_state).replace("REASON", reason))
        scontrol.chmod(0o755)

    controller("IDLE", "(null)")
    done = healthcheck(
        {**place, "common": [*place["common"], "--config", str(failing)]}, *slurm_args
    )
    assert done.returncode == 1, done.stderr
    assert "slurm: drained" in done.stdout
    kept = json.loads((place["state"] / "state.json").read_text())
    assert [(e["action"], e["causes"]) for e in kept["history"]] == [("drained", ["shm.size"])]
    assert kept["counts"] == {"drained": 1, "resumed": 0, "repaired": 0}

    controller("IDLE+DRAIN", "hostcheck: shm: size 64.0 MiB [root@2026-11-29T12:00:00]")
    done = healthcheck(place, *slurm_args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "slurm: resumed" in done.stdout
    kept = json.loads((place["state"] / "state.json").read_text())
    assert [(e["action"], e["causes"]) for e in kept["history"]] == [
        ("drained", ["shm.size"]),
        ("resumed", ["shm.size"]),
    ]
    counted = {
        s.labels["action"]: s.value
        for f in text_string_to_metric_families(textfile.read_text())
        for s in f.samples
        if s.name == "hostcheck_healthcheck_actions_total"
    }
    assert counted == {"drained": 1, "resumed": 1, "repaired": 0}
    drain, resume = (place["tmp"] / "scontrol.updates").read_text().splitlines()
    assert drain.startswith("update NodeName=node2 State=DRAIN Reason=hostcheck: shm: size "), drain
    assert resume == "update NodeName=node2 State=RESUME"
