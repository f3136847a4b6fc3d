"""The cap on hostcheck's own drains: a share of each partition of the node, at least one node;
decided from `scontrol -o show node` and said in the line, state.json and the textfile."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hostcheck.health import slurm
from hostcheck.health.verdict import UNHEALTHY, Verdict
from tests.unit.hostcheck.health.test_command import healthcheck, place  # noqa: F401

SICK = Verdict(UNHEALTHY, causes=["shm: size 32.0 MiB (expected >= 48.0 MiB)"])


def node(name, state="IDLE", reason="", partitions=("gpu",)):
    return slurm.Node(name, state, reason, tuple(partitions))


@pytest.mark.parametrize(
    ("percent", "nodes", "allowed"),
    [(10, 3, 1), (10, 10, 1), (10, 25, 2), (34, 3, 1), (50, 4, 2), (100, 8, 8), (10, 100, 10)],
)
def test_the_cap_allows_a_share_and_never_less_than_one_node(percent, nodes, allowed):
    assert slurm.Cap(percent).allowed(nodes) == allowed


def test_a_second_drain_in_three_nodes_at_34_percent_is_held_back():
    nodes = [
        node("node1", "IDLE+DRAIN", "hostcheck: gpu: gpu2 xid Xid 79 x1"),
        node("node2"),
        node("node3"),
    ]
    capped = slurm.over_cap("node2", ("gpu",), nodes, slurm.Cap(34))
    assert (capped.partition, capped.drained, capped.nodes, capped.allowed) == (
        "gpu",
        ["node1"],
        3,
        1,
    )
    assert capped.said(34) == (
        "not drained: the cap is reached (hostcheck drains 1 of the 3 nodes of partition gpu: "
        "node1; 34 % allows 1)"
    )


def test_drains_by_someone_else_and_other_partitions_do_not_count():
    nodes = [
        node("node1", "IDLE+DRAIN", "maintenance"),
        node("node2"),
        node("node3", "IDLE+DRAIN", "hostcheck: shm: ...", partitions=("cpu",)),
        node("node4", partitions=("cpu",)),
    ]
    assert slurm.over_cap("node2", ("gpu",), nodes, slurm.Cap(34)) is None


def test_each_partition_of_the_node_is_held_to_the_cap():
    nodes = [
        node("a", partitions=("gpu", "debug")),
        node("b", "MIXED+DRAIN", "hostcheck: x", partitions=("debug",)),
        *(node(f"g{i}") for i in range(8)),
    ]
    capped = slurm.over_cap("a", ("gpu", "debug"), nodes, slurm.Cap(50))
    assert (capped.partition, capped.drained) == ("debug", ["b"])


class FakeScontrol:
    def __init__(self, nodes):
        self.by_name = {n.name: n for n in nodes}
        self.updates = []

    def node(self, name):
        return self.by_name[name]

    def nodes(self):
        return list(self.by_name.values())

    def drain(self, name, reason):
        self.updates.append(("drain", name, reason))

    def resume(self, name):
        self.updates.append(("resume", name))


def test_act_holds_back_a_new_drain_and_changes_nothing():
    scontrol = FakeScontrol(
        [node("node1", "IDLE+DRAIN", "hostcheck: a"), node("node2"), node("node3")]
    )
    acted = slurm.act(scontrol, "node2", SICK, cap=slurm.Cap(34))
    assert acted.capped is not None and acted.said.startswith("not drained: the cap is reached")
    assert scontrol.updates == []


def test_act_still_updates_the_reason_of_a_node_it_already_drained():
    scontrol = FakeScontrol(
        [node("node1", "IDLE+DRAIN", "hostcheck: a"), node("node2", "IDLE+DRAIN", "hostcheck: old")]
    )
    acted = slurm.act(scontrol, "node2", SICK, cap=slurm.Cap(1))
    assert acted.capped is None
    assert scontrol.updates == [("drain", "node2", slurm.drain_reason(SICK))]


def test_act_drains_under_the_cap_and_with_the_cap_off():
    for cap in (slurm.Cap(34), slurm.Cap(0)):
        scontrol = FakeScontrol([node("node1"), node("node2"), node("node3")])
        assert slurm.act(scontrol, "node2", SICK, cap=cap).said == "drained"
        assert scontrol.updates == [("drain", "node2", slurm.drain_reason(SICK))]
    scontrol = FakeScontrol(
        [node("node1", "IDLE+DRAIN", "hostcheck: a"), node("node2"), node("node3")]
    )
    assert slurm.act(scontrol, "node2", SICK, cap=slurm.Cap(0)).said == "drained"


def test_scontrol_show_node_lines_give_the_partitions():
    parsed = slurm.parse_node(
        "NodeName=node2 Arch=x86_64 State=IDLE+DRAIN Partitions=gpu,debug "
        "Reason=hostcheck: shm: size 32.0 MiB [root@2026-11-29T20:01:02]"
    )
    assert parsed.partitions == ("gpu", "debug")
    assert parsed.reason == "hostcheck: shm: size 32.0 MiB"


SCONTROL = """#!/bin/sh
# the controller's answer: node1 drained by hostcheck, node2 (this one) and node3 idle
if [ "$1 $2 $3 $4" = "-o show node node2" ]; then
  echo "NodeName=node2 State=IDLE Partitions=gpu Reason=(null)"
elif [ "$1 $2 $3" = "-o show node" ]; then
  echo "NodeName=node1 State=IDLE+DRAIN Partitions=gpu Reason=hostcheck: x [root@2026-11-29]"
  echo "NodeName=node2 State=IDLE Partitions=gpu Reason=(null)"
  echo "NodeName=node3 State=IDLE Partitions=gpu Reason=(null)"
else
  echo "$@" >> "$0.updates"
fi
"""


def test_the_command_says_the_cap_in_its_line_state_and_textfile(place):  # noqa: F811
    scontrol = place["tmp"] / "scontrol"
    scontrol.write_text(SCONTROL)
    scontrol.chmod(0o755)
    textfile = place["tmp"] / "healthcheck.prom"
    place["common"] += ["--config", str(place["tmp"] / "shm-fails.yaml")]
    (place["tmp"] / "shm-fails.yaml").write_text(
        (place["tmp"] / "config.yaml")
        .read_text()
        .replace("shm: {min_size: 1MiB", "shm: {min_size: 1PiB")
    )
    done = healthcheck(
        place,
        "--slurm",
        "--node",
        "node2",
        "--scontrol",
        str(scontrol),
        "--max-drained",
        "34",
        "--textfile",
        str(textfile),
    )
    assert done.returncode == 1, done.stderr
    assert (
        "slurm: not drained: the cap is reached (hostcheck drains 1 of the 3 nodes" in done.stdout
    )
    assert not (place["tmp"] / "scontrol.updates").exists()
    saved = json.loads((place["state"] / "state.json").read_text())["last"]
    assert saved["drain_capped"] == {
        "partition": "gpu",
        "drained": ["node1"],
        "nodes": 3,
        "allowed": 1,
        "percent": 34.0,
    }
    values = {
        (s.name, s.labels.get("state")): s.value
        for f in text_string_to_metric_families(textfile.read_text())
        for s in f.samples
    }
    assert values[("hostcheck_healthcheck_drain_capped", None)] == 1
    assert values[("hostcheck_healthcheck_verdict", "unhealthy")] == 1
    assert values[("hostcheck_healthcheck_verdict", "healthy")] == 0


def test_a_cap_out_of_range_is_bad_usage(place):  # noqa: F811
    done = healthcheck(place, "--slurm", "--max-drained", "120")
    assert done.returncode == 2
    assert "--max-drained must be a percent from 0 to 100" in done.stderr + done.stdout


def test_a_textfile_that_cannot_be_written_leaves_the_verdict_as_it_is(place):  # noqa: F811
    done = healthcheck(place, "--textfile", str(place["tmp"] / "absent" / "hc.prom"))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "textfile not written: No such file or directory" in done.stdout
