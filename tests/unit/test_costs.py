"""The suite's cost ledger: CPU counted for what a process starts, one line a module, and the
table ranked by CPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import costs


def test_the_meter_counts_the_cpu_of_the_processes_it_starts():
    meter = costs.CpuMeter()
    try:
        before = meter.seconds()
        burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
        subprocess.run([sys.executable, "-c", burn], check=True)
        assert meter.seconds() - before >= 0.35
    finally:
        meter.close()


def test_each_module_is_one_line_with_its_outcomes(tmp_path):
    ledger = costs.Ledger(tmp_path / "run.jsonl", "gw1")
    try:
        ledger.start("tests/integration/test_a.py")
        ledger.outcome("tests/integration/test_a.py", "passed")
        ledger.outcome("tests/integration/test_a.py", "passed")
        ledger.outcome("tests/integration/test_b.py", "failed")  # not the current module
        ledger.outcome("tests/integration/test_a.py", "skipped")
        costs.SSH_LOGINS[0] += 3  # what three Fleet.ssh_argv calls count
        ledger.finish()
        ledger.finish()  # nothing current: nothing written
    finally:
        ledger.close()
    (line,) = (tmp_path / "run.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["module"] == "tests/integration/test_a.py"
    assert record["worker"] == "gw1"
    assert record["outcomes"] == {"passed": 2, "skipped": 1}
    assert record["ssh_logins"] == 3
    assert record["cpu_source"] in ("cgroup", "rusage")
    assert record["wall_s"] >= 0 and record["cpu_s"] >= 0


def test_the_table_ranks_modules_by_cpu_and_sums_the_rest(tmp_path):
    path = tmp_path / "run-1.jsonl"
    costs.write_line(path, {"run": "run-1", "pace_s": 0.15, "argv": [], "cpus": 2, "load": 0})
    for module, cpu, wall, start in (("a", 60, 30, 0), ("b", 600, 300, 10), ("c", 120, 90, 20)):
        costs.write_line(
            path,
            {"module": module, "worker": "gw0", "start": 1000 + start, "wall_s": wall,
             "cpu_s": cpu, "outcomes": {"passed": 2}, "cpu_source": "cgroup",
             "ssh_logins": start},
        )  # fmt: skip
    rows = costs.table(path, top=2).splitlines()
    assert rows[0].startswith("run-1.jsonl: pace 0.15 s")
    assert "3 modules, first to last 5.2 min, CPU 13.0 min" in rows[0]  # 1000 to 1310 s
    assert [row.split()[-1] for row in rows[2:4]] == ["b", "c"]
    assert rows[2].split()[:3] == ["10.00", "76.9%", "5.00"]
    assert rows[2].split()[3:5] == ["2", "10"]  # tests, SSH logins
    assert rows[4].split()[:5] == ["1.00", "7.7%", "0.50", "2", "0"]
    assert rows[4].endswith("(1 more modules)")


def test_the_command_prints_the_named_ledger_and_refuses_a_missing_one(tmp_path, capsys):
    path = tmp_path / "run-2.jsonl"
    costs.write_line(path, {"run": "run-2", "pace_s": 0.2, "argv": [], "cpus": 2, "load": 0})
    costs.write_line(
        path,
        {"module": "m", "worker": "main", "start": 0, "wall_s": 6, "cpu_s": 3,
         "outcomes": {"failed": 1}, "cpu_source": "rusage"},
    )  # fmt: skip
    assert costs.main([str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("m  (1 failed)")
    assert costs.main([str(tmp_path / "none.jsonl")]) == 2
    assert "tests.costs: no ledger at" in capsys.readouterr().err


def test_the_command_piped_into_head_ends_without_a_traceback(tmp_path):
    path = tmp_path / "run-3.jsonl"
    costs.write_line(path, {"run": "run-3", "pace_s": 0.2, "argv": [], "cpus": 2, "load": 0})
    for index in range(3000):
        costs.write_line(
            path,
            {"module": f"m{index}", "worker": "main", "start": 0, "wall_s": 6, "cpu_s": 3,
             "outcomes": {"passed": 1}, "cpu_source": "rusage"},
        )  # fmt: skip
    done = subprocess.run(
        f"{sys.executable} -m tests.costs {path} | head -1",
        shell=True,
        cwd=costs.CHECKOUT,
        capture_output=True,
        text=True,
    )
    assert done.stdout.startswith("run-3.jsonl: pace 0.2 s"), done.stdout
    assert done.stderr == ""


def test_playbook_runs_are_grouped_by_module_and_playbook_and_ranked_by_cpu(tmp_path, monkeypatch):
    path = tmp_path / "run-3.jsonl"
    costs.write_line(path, {"run": "run-3", "pace_s": 0.2, "argv": [], "cpus": 2, "load": 0})
    monkeypatch.setenv(costs.LEDGER_ENVIRONMENT, str(path))
    runs = (
        ("tests/integration/test_a.py::test_one (call)", "site.yml", "", 3, 180, 60),
        ("tests/integration/test_a.py::test_two (call)", "site.yml", "", 3, 120, 30),
        ("tests/integration/test_a.py::test_two (call)", "site.yml", "shm", 1, 30, 6),
        ("tests/integration/test_b.py::test_three (setup)", "playbooks/audit.yml", "", 2, 600, 90),
    )
    for test, playbook, tags, hosts, cpu, controller in runs:
        monkeypatch.setenv("PYTEST_CURRENT_TEST", test)
        costs.record_playbook_run(
            {"playbook": playbook, "tags": tags, "check": False, "returncode": 0, "hosts": hosts,
             "tasks": 40 * hosts, "changed": 0, "wall_s": cpu / 2, "controller_cpu_s": controller,
             "cpu_s": cpu},
        )  # fmt: skip
    assert costs.read(path)[1] == []  # no module lines: the module table is not disturbed
    rows = costs.runs_table(path).splitlines()
    assert rows[0] == (
        "run-3.jsonl: 4 ansible-playbook runs, 9 host runs, CPU while they ran 15.5 min"
        " (controller 3.1)"
    )
    assert rows[2].split() == [
        *("10.00", "1.50", "5.00", "1", "2", "40"),
        *("tests/integration/test_b.py", "playbooks/audit.yml"),
    ]  # fmt: skip
    assert rows[3].split() == [
        "5.00", "1.50", "2.50", "2", "6", "40", "tests/integration/test_a.py", "site.yml"
    ]  # fmt: skip
    assert rows[4].endswith("test_a.py  site.yml [shm]")
    assert costs.main(["--runs", "--top", "1", str(path)]) == 0


def test_own_cgroup_cpu_counts_what_it_starts():
    meter = costs.CpuMeter()  # moves this process into a cgroup of its own, where it can
    try:
        before = costs.own_cgroup_cpu_seconds()
        burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
        subprocess.run([sys.executable, "-c", burn], check=True)
        after = costs.own_cgroup_cpu_seconds()
        if meter.source != "cgroup":
            pytest.skip("no cgroup v2 of its own here (not root, or no unified hierarchy)")
        assert after - before >= 0.25
    finally:
        meter.close()


def test_task_seconds_sum_by_name_and_rank_across_runs(tmp_path, monkeypatch):
    def task(name, start, end):
        stamp = "2026-11-28T10:00:{:06.3f}+00:00".format
        duration = {"start": stamp(start), "end": stamp(end)}
        return {"task": {"name": name, "duration": duration}, "hosts": {}}

    output = {
        "plays": [
            {"tasks": [task("Gathering Facts", 0, 2.5), task("shm : Mount", 2.5, 3.0)]},
            {"tasks": [task("shm : Mount", 10, 10.25),
                       {"task": {"name": "never ended", "duration": {"start": "x"}}}]},
        ]
    }  # fmt: skip
    assert costs.task_seconds(output) == {"Gathering Facts": 2.5, "shm : Mount": 0.75}
    assert costs.task_seconds({}) == {}

    path = tmp_path / "run-4.jsonl"
    costs.write_line(path, {"run": "run-4", "pace_s": 0.2, "argv": [], "cpus": 2, "load": 0})
    monkeypatch.setenv(costs.LEDGER_ENVIRONMENT, str(path))
    for test, seconds in (
        ("tests/integration/test_a.py::t (call)", {"Gathering Facts": 60.0, "shm : Mount": 6.0}),
        ("tests/integration/test_b.py::t (call)", {"Gathering Facts": 30.0}),
    ):
        monkeypatch.setenv("PYTEST_CURRENT_TEST", test)
        costs.record_playbook_run(
            {"playbook": "site.yml", "hosts": 1, "tasks": 2, "task_s": seconds}
        )
    rows = costs.tasks_table(path).splitlines()
    assert rows[0] == "run-4.jsonl: 2 task names, 1.6 min of task wall time"
    assert rows[2].split() == ["1.50", "93.8%", "2", "2", "Gathering", "Facts"]
    assert rows[3].split() == ["0.10", "6.2%", "1", "1", "shm", ":", "Mount"]
    assert costs.main(["--tasks", str(path)]) == 0
