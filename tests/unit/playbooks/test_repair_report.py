"""The report of playbooks/repair.yml (playbooks/files/repair_report.py): each host's action
from the facts the play recorded, the JSON file and table, and the exit status that says a
host needs a person. The play itself runs on the real Slurm cluster
(tests/integration/test_slurm_healthcheck.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.ansible import CHECKOUT_CONTROLLER
from tests.paths import CHECKOUT as REPO

REPORT = REPO / "playbooks" / "files" / "repair_report.py"

SHM = {
    "key": "shm.size",
    "shown": "size 32.0 MiB",
    "remedy": "set shm_size (role shm) and run: ansible-playbook site.yml --tags shm",
    "fix": "role",
    "roles": ["shm"],
    "repaired_before": "",
}
REMAP = {
    "key": "gpu.gpu0 row remapping",
    "shown": "gpu0 row remapping a row remap is pending",
    "remedy": "",
    "fix": "reboot",
    "roles": [],
    "repaired_before": "",
}
ECC = {
    "key": "gpu.gpu0 ecc",
    "shown": "gpu0 ecc uncorrected 2 volatile",
    "remedy": "not fixable by a role variable: drain the node and replace the GPU",
    "fix": "person",
    "roles": [],
    "repaired_before": "",
}


def repaired(**facts) -> dict:
    """The facts the play records for a host it took on (as Ansible hands them over: text)."""
    outcome = {
        "node": "node2",
        "check_mode": "False",
        "roles": ["shm"],
        "causes": [SHM],
        "for_a_person": [],
        "reboot": "False",
        "reboot_why": "",
        "passed_before": "False",
        "passes": "True",
        "failed": "",
        "was_drained_by_hostcheck": "True",
        "drained_now": "False",
        "resumed": "True",
        "rebooting": "False",
        "drained_by_someone_else": "False",
        "before": {"shm.size": "size 32.0 MiB"},
        "after": {"shm.size": "pass: size 64.0 MiB"},
    }
    return {**outcome, **facts}


def run(folder, outcomes) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPORT), str(folder)],
        input=outcomes if isinstance(outcomes, str) else json.dumps(outcomes),
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("facts", "action", "said"),
    [
        ({}, "repaired and resumed", "role shm run; hostcheck passes; resumed"),
        (
            {"resumed": "False"},
            "repaired and resumed",
            "role shm run; hostcheck passes; the health check resumed it first",
        ),
        (
            {
                "resumed": "False",
                "was_drained_by_hostcheck": "False",
            },
            "repaired",
            "role shm run; hostcheck passes",
        ),
        (
            {"check_mode": "True", "passes": "False", "resumed": "False"},
            "would repair",
            "run role shm; check it again, resume it if it passes (check mode: nothing changed)",
        ),
        (
            {
                "passes": "False",
                "resumed": "False",
                "drained_now": "True",
                "after": {"shm.size": "fail: size 32.0 MiB"},
            },
            "for a person",
            "still failing after role shm: shm.size: fail: size 32.0 MiB",
        ),
        (
            {"passes": "False", "resumed": "False", "failed": "Run the role: shm_size: too big"},
            "for a person",
            "the repair failed: Run the role: shm_size: too big",
        ),
        (
            {
                "causes": [{**SHM, "repaired_before": "2026-11-29T10:00:00Z"}],
                "for_a_person": ["shm.size"],
                "roles": [],
                "passes": "False",
                "resumed": "False",
            },
            "for a person",
            "shm.size came back: repaired at 2026-11-29T10:00:00Z, within the window",
        ),
        (
            {"causes": [ECC], "for_a_person": ["gpu.gpu0 ecc"], "roles": [], "passes": "False"},
            "for a person",
            "gpu.gpu0 ecc (gpu0 ecc uncorrected 2 volatile): not fixable by a role variable: "
            "drain the node and replace the GPU",
        ),
        (
            {
                "causes": [REMAP],
                "roles": [],
                "reboot": "True",
                "reboot_why": "slurm.conf has no RebootProgram, so Slurm cannot do it",
                "passes": "False",
                "resumed": "False",
            },
            "for a person",
            "needs a reboot (gpu.gpu0 row remapping): slurm.conf has no RebootProgram, so Slurm "
            "cannot do it",
        ),
        (
            {
                "causes": [REMAP],
                "roles": [],
                "reboot": "True",
                "rebooting": "True",
                "passes": "False",
                "resumed": "False",
            },
            "rebooting",
            "no role run; Slurm reboots it (gpu.gpu0 row remapping) and resumes it after",
        ),
        ({"passed_before": "True", "causes": [], "roles": []}, "resumed", "passes; resumed"),
        (
            {
                "passed_before": "True",
                "causes": [],
                "resumed": "False",
                "was_drained_by_hostcheck": "False",
            },
            "nothing to do",
            "passes",
        ),
        (
            {"action": "failed", "said": "unreachable: ssh timed out"},
            "failed",
            "unreachable: ssh timed out",
        ),
    ],
)
def test_each_outcome_is_one_action_and_why(tmp_path, facts, action, said):
    outcome = (
        {"action": facts.pop("action"), "said": facts.pop("said")}
        if "action" in facts
        else repaired(**facts)
    )
    done = run(tmp_path, {"node2": outcome})
    assert done.returncode == (1 if action in ("for a person", "failed") else 0), done.stderr
    (written,) = tmp_path.glob("repair-*.json")
    entry = json.loads(written.read_text())["hosts"][0]
    assert (entry["host"], entry["action"], entry["said"]) == ("node2", action, said)


def test_one_report_names_every_host_and_the_run_fails_for_a_person(tmp_path):
    outcomes = {
        "node1": {"skipped": "not drained by hostcheck"},
        "node2": repaired(),
        "node3": repaired(
            causes=[ECC], for_a_person=["gpu.gpu0 ecc"], roles=[], passes="False", resumed="False"
        ),
        "node4": {},
    }
    done = run(tmp_path, outcomes)
    assert done.returncode == 1
    (written,) = tmp_path.glob("repair-*.json")
    document = json.loads(written.read_text())
    assert document["kind"] == "hostcheck-repair"
    assert document["counts"] == {
        "skipped": 1,
        "repaired and resumed": 1,
        "for a person": 1,
        "failed": 1,
    }
    assert document["needs_a_person"] == ["node3", "node4"]
    assert document["hosts"][1]["before"] == {"shm.size": "size 32.0 MiB"}
    assert document["hosts"][1]["after"] == {"shm.size": "pass: size 64.0 MiB"}
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["host", "action", "why"]
    assert lines[1].split(None, 2) == ["node1", "skipped", "not drained by hostcheck"]
    assert lines[2].endswith(
        "role shm run; hostcheck passes; resumed [shm.size: size 32.0 MiB -> pass: size 64.0 MiB]"
    )
    assert "the repair stopped on this host before it had an outcome" in lines[4]
    assert lines[-1] == f"report: {written}"
    assert done.stderr.startswith("repair: 2 host(s) need a person: node3 (gpu.gpu0 ecc")
    again = run(tmp_path, {"node1": {"skipped": "over repair_max_hosts (5)"}})
    assert again.returncode == 0
    assert len(list(tmp_path.glob("repair-*.json"))) == 2  # a second run the same second


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    done = run(tmp_path, "[not json")
    assert done.returncode == 2
    assert done.stderr.startswith("repair_report.py: standard input is not JSON: ")
    done = run(tmp_path, ["node1"])
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "repair_report.py: standard input: not {host: outcome}",
    )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"repair_from": "nagios"}, "repair_from: slurm, audit, prometheus or hosts, got 'nagios'"),
        ({"repair_max_hosts": 0}, "repair_max_hosts: a whole number above 0, got '0'"),
        ({"repair_window_days": "-1"}, "repair_window_days: a number of days, 0 or more, got '-1'"),
        ({"repair_from": "audit"}, "repair_audit_dir: needed with repair_from=audit"),
        ({"repair_slurm_host": "login9"}, "got 'login9'"),
    ],
)
def test_bad_variables_fail_the_play_before_any_host_is_touched(tmp_path, extra, named):
    # the host's address is one nothing answers on: a play that reached it would fail otherwise
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "gpu_nodes:\n  hosts:\n    node1: {ansible_host: 192.0.2.1, ansible_connection: ssh}\n"
    )
    done = subprocess.run(
        [
            str(CHECKOUT_CONTROLLER.bin / "ansible-playbook"),
            "-i",
            str(inventory),
            "playbooks/repair.yml",
            "-e",
            json.dumps({**extra, "repair_reports_dir": str(tmp_path)}),
        ],
        capture_output=True,
        text=True,
        cwd=CHECKOUT_CONTROLLER.cwd,
        env=CHECKOUT_CONTROLLER.environment(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout[-2000:]
    assert "TASK [Check the repair variables]" in done.stdout
    assert named in done.stdout
    assert "UNREACHABLE" not in done.stdout and "TASK [Read Slurm" not in done.stdout
    assert not list(tmp_path.glob("repair-*.json"))
