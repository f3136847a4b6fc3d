"""The suite's cost ledger: CPU counted for what a process starts, one line a module, and the
table ranked by CPU."""

from __future__ import annotations

import json
import subprocess
import sys

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
        ledger.finish()
        ledger.finish()  # nothing current: nothing written
    finally:
        ledger.close()
    (line,) = (tmp_path / "run.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["module"] == "tests/integration/test_a.py"
    assert record["worker"] == "gw1"
    assert record["outcomes"] == {"passed": 2, "skipped": 1}
    assert record["cpu_source"] in ("cgroup", "rusage")
    assert record["wall_s"] >= 0 and record["cpu_s"] >= 0


def test_the_table_ranks_modules_by_cpu_and_sums_the_rest(tmp_path):
    path = tmp_path / "run-1.jsonl"
    costs.write_line(path, {"run": "run-1", "pace_s": 0.15, "argv": [], "cpus": 2, "load": 0})
    for module, cpu, wall, start in (("a", 60, 30, 0), ("b", 600, 300, 10), ("c", 120, 90, 20)):
        costs.write_line(
            path,
            {"module": module, "worker": "gw0", "start": 1000 + start, "wall_s": wall,
             "cpu_s": cpu, "outcomes": {"passed": 2}, "cpu_source": "cgroup"},
        )  # fmt: skip
    rows = costs.table(path, top=2).splitlines()
    assert rows[0].startswith("run-1.jsonl: pace 0.15 s")
    assert "3 modules, first to last 5.2 min, CPU 13.0 min" in rows[0]  # 1000 to 1310 s
    assert [row.split()[-1] for row in rows[2:4]] == ["b", "c"]
    assert rows[2].split()[:3] == ["10.00", "76.9%", "5.00"]
    assert rows[4].split()[:4] == ["1.00", "7.7%", "0.50", "2"]
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
