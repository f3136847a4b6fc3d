"""Pieces of the fleet audit and the hostcheck timer that run without hosts: the marker writer
of playbooks/audit.yml (read back by hostcheck fleet's own loader), the systemd quoting of the
timer's ExecStart=, and the rendered units checked by systemd-analyze where it is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.systemd_quoting import (
    systemd_quote,
    systemd_split,
)
from hypothesis import given
from hypothesis import strategies as st

from hostcheck.fleet.load import read_folders
from tests.paths import CHECKOUT as REPO

MARKERS = REPO / "playbooks" / "files" / "audit_markers.py"


def write_markers(folder: Path, outcomes: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(MARKERS), str(folder)],
        input=json.dumps(outcomes),
        capture_output=True,
        text=True,
        check=False,
    )


def test_markers_for_hosts_without_a_file_only_and_fleet_reads_them(tmp_path):
    (tmp_path / "gpu01.json").write_text('{"a report": "kept as it is"}')
    done = write_markers(
        tmp_path,
        {
            "gpu01": {"state": "report"},
            "gpu02": {"state": "unreachable", "reason": "ssh: connect to host gpu02: refused"},
            "gpu03": {"state": "timeout", "reason": "did not finish\n within 300 s"},
            "gpu04": {},
            "gpu05": {"state": "report"},  # said fetched, but no file: no-report
        },
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"written": ["gpu02", "gpu03", "gpu04", "gpu05"]}
    assert (tmp_path / "gpu01.json").read_text() == '{"a report": "kept as it is"}'
    marker = json.loads((tmp_path / "gpu03.json").read_text())
    assert marker["kind"] == "hostcheck-audit-marker" and marker["host"] == "gpu03"
    assert marker["reason"] == "did not finish within 300 s" and marker["at"].endswith("Z")
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temporary left
    (folder,) = read_folders([str(tmp_path)])
    states = {e.host: (e.state, e.reason) for e in folder.entries}
    assert states["gpu02"] == ("unreachable", "ssh: connect to host gpu02: refused")
    assert states["gpu03"][0] == "timeout"
    assert states["gpu04"][0] == states["gpu05"][0] == "no-report"
    assert "the play stopped for it" in states["gpu04"][1]
    again = write_markers(tmp_path, {"gpu02": {"state": "timeout"}})
    assert json.loads(again.stdout) == {"written": []}  # an existing file is never replaced


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        ([], "{}", "usage"),
        (["/nonexistent"], "{}", "usage"),
        (["."], "not json", "not JSON"),
        (["."], "[]", "JSON object"),
        (["."], '{"../etc/x": {}}', "cannot be a file name"),
    ],
)
def test_marker_writer_refuses_bad_input(tmp_path, argv, stdin, message):
    argv = [str(tmp_path) if a == "." else a for a in argv]
    done = subprocess.run(
        [sys.executable, str(MARKERS), *argv], input=stdin, capture_output=True, text=True
    )
    assert done.returncode == 1 and message in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["/opt/venvs/train/bin/hostcheck", "run"], "/opt/venvs/train/bin/hostcheck run"),
        (["--dataset-path", "/data/my set"], '--dataset-path "/data/my set"'),
        (["--set", "shm.min_size=50%"], '--set "shm.min_size=50%%"'),
        (["a$HOME", 'say "hi"\\'], '"a$$HOME" "say \\"hi\\"\\\\"'),
        ([""], '""'),
    ],
)
def test_exec_start_quoting(argv, line):
    assert " ".join(systemd_quote(a) for a in argv) == line
    assert systemd_split(line) == argv


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20)))
def test_exec_start_quoting_round_trips(argv):
    assert systemd_split(" ".join(systemd_quote(a) for a in argv)) == argv


def test_the_stamp_is_taken_once_and_names_the_folder():
    """The controller's folder and each host's report are named by one stamp: now() templated
    twice can straddle a second on a loaded controller (seen in a run: the folder ...0842Z,
    node1's report ...0843Z)."""
    plays = yaml.safe_load((REPO / "playbooks" / "audit.yml").read_text())
    tasks = [task for play in plays for task in play.get("tasks", [])]
    taking = [task for task in tasks if "now(" in json.dumps(task)]
    assert [task["name"] for task in taking] == ["Take the audit's UTC stamp (one for the run)"]
    (folder,) = [t for t in tasks if "__audit_folder" in t.get("ansible.builtin.set_fact", {})]
    assert (
        folder["ansible.builtin.set_fact"]["__audit_folder"]
        .rstrip()
        .endswith("~ '/' ~ __audit_stamp }}")
    )
    assert folder.get("run_once") is True
