"""hostcheck fleet on folders of real reports (mutated copies): verdicts, counts, outliers,
drift. Each test runs the command in-process and reads its JSON output."""

from __future__ import annotations

import json
import os

import pytest

from hostcheck.cli import main
from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from hostcheck.fleet.outliers import find_outliers
from hostcheck.fleet.settings import FleetSettings
from hostcheck.report.entry import HostEntry
from tests.support.fleet_reports import host, marker, status, write

AUDIT = "20260102T000000Z"
EARLIER = "20260101T000000Z"


def fleet(capsys, *args: str) -> tuple[int, dict]:
    code = main(["fleet", *map(str, args), "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def by_host(document: dict) -> dict[str, dict]:
    return {h["host"]: h for h in document["hosts"]}


@pytest.fixture
def settings() -> FleetSettings:
    return FleetSettings.from_profile(load_profile("default", profile_schema()).values)


def test_verdict_and_reasons_per_host(tmp_path, capsys, real_report):
    audit = tmp_path / AUDIT
    write(audit, "node1", host(real_report, "node1"))
    write(audit, "node2", host(real_report, "node2", fail=["shm", "ulimits"]))
    warned = status(host(real_report, "node3"), "cpu", "warn", "2 workers per rank")
    write(audit, "node3", warned)
    write(audit, "node4", marker("node4", "timeout", "hostcheck run: no answer in 300 s"))
    code, doc = fleet(capsys, audit)
    hosts = by_host(doc)
    assert code == 1
    assert (hosts["node1"]["verdict"], hosts["node1"]["reasons"]) == ("pass", [])
    assert (hosts["node2"]["verdict"], hosts["node2"]["reasons"]) == ("fail", ["shm", "ulimits"])
    assert hosts["node2"]["problems"]["shm"] == "shm is broken"
    assert (hosts["node3"]["verdict"], hosts["node3"]["reasons"]) == ("warn", ["cpu"])
    assert hosts["node4"]["verdict"] == "timeout"
    assert hosts["node4"]["reason"] == "hostcheck run: no answer in 300 s"
    assert doc["verdicts"]["pass"] == 1 and doc["verdicts"]["timeout"] == 1
    assert doc["hosts_total"] == 4 and doc["exit_code"] == 1


def test_counts_per_check(tmp_path, capsys, real_report):
    audit = tmp_path / AUDIT
    for name, failing in (("a", []), ("b", ["shm"]), ("c", ["shm", "sysctl"])):
        write(audit, name, host(real_report, name, fail=failing))
    lacking = host(real_report, "d")
    lacking["checks"] = [c for c in lacking["checks"] if c["id"] != "sysctl"]
    write(audit, "d", lacking)
    write(audit, "e", marker("e"))
    _, doc = fleet(capsys, audit)
    checks = {c["id"]: c for c in doc["checks"]}
    assert (checks["shm"]["pass"], checks["shm"]["fail"]) == (2, 2)
    assert (checks["sysctl"]["pass"], checks["sysctl"]["fail"]) == (2, 1)
    assert checks["sysctl"]["missing"] == 1  # d ran without it; e has no report at all
    assert checks["gpu"]["skip"] == 4  # no NVIDIA driver on this machine
    assert list(checks) == [c["id"] for c in real_report["checks"]]


def test_all_pass_exits_zero_and_warn_exits_one_only_under_fail_on_warn(
    tmp_path, capsys, real_report
):
    audit = tmp_path / AUDIT
    write(audit, "a", host(real_report, "a"))
    write(audit, "b", status(host(real_report, "b"), "cpu", "warn"))
    assert fleet(capsys, audit)[0] == 0
    assert fleet(capsys, audit, "--fail-on", "warn")[0] == 1


def test_slow_host_among_six_identical_is_an_outlier(tmp_path, capsys, real_report):
    audit = tmp_path / AUDIT
    for i, rate in enumerate((1000, 1010, 990, 1005, 995, 100)):
        write(audit, f"gpu{i}", host(real_report, f"gpu{i}", loop=(float(rate), 0.01)))
    # different hardware, as slow: compared with nobody (a group of one)
    other = ("NVIDIA L4", 1, "Intel Xeon Silver")
    write(audit, "small", host(real_report, "small", loop=(100.0, 0.01), hw=other))
    _, doc = fleet(capsys, audit)
    slow = [o for o in doc["outliers"] if o["metric"] == "loop.throughput"]
    assert [o["host"] for o in slow] == ["gpu5"]
    (outlier,) = slow
    assert outlier["median"] == 997.5
    assert outlier["group_size"] == 6
    assert outlier["ratio"] == pytest.approx(100 / 997.5, rel=1e-3)
    assert outlier["z"] == pytest.approx(0.6745 * (100 - 997.5) / 7.5, rel=1e-3)
    assert outlier["group"] == "8 x NVIDIA H100 80GB HBM3 | AMD EPYC 9654"
    assert doc["hosts"][0]["verdict"] == "pass"  # every value passed its own threshold
    assert by_host(doc)["small"]["hardware"] == "1 x NVIDIA L4 | Intel Xeon Silver"


def entry(name: str, hw: str, **values: float) -> HostEntry:
    gpu, cpu = hw.split("|")
    return HostEntry(
        host=name,
        file=f"{name}.json",
        checks={"loop": "pass"},
        values={k.replace("_", "."): v for k, v in values.items()},
        facts={"gpu_model": gpu, "gpu_count": 8, "cpu_model": cpu},
    )


def test_mad_zero_flags_a_different_value_beyond_min_relative(settings):
    same = [entry(f"n{i}", "H100|EPYC", shm_size=64.0) for i in range(5)]
    bigger = entry("n5", "H100|EPYC", shm_size=128.0)
    close = entry("n6", "H100|EPYC", shm_size=66.0)  # 3 %: under min_relative (10 %)
    (found,) = find_outliers([*same, bigger, close], settings)
    assert (found.host, found.metric, found.z, found.mad) == ("n5", "shm.size", None, 0)


def test_groups_smaller_than_min_group_are_not_compared(settings):
    hosts = [entry(f"n{i}", "A100|EPYC", loop_throughput=v) for i, v in enumerate((10, 10, 1))]
    assert find_outliers(hosts, settings) == []
    assert len(find_outliers(hosts, FleetSettings(min_group=3))) == 1


def test_ignored_metrics_and_z_threshold_come_from_the_profile(tmp_path, capsys, real_report):
    audit = tmp_path / AUDIT
    for i, rate in enumerate((1000, 1010, 990, 1005, 995, 100)):
        write(audit, f"gpu{i}", host(real_report, f"gpu{i}", loop=(float(rate), 0.01)))
    _, doc = fleet(capsys, audit, "--set", "fleet.outliers.ignore=[loop.*]")
    assert doc["outliers"] == []
    _, doc = fleet(capsys, audit, "--set", "fleet.outliers.z=100")
    assert doc["outliers"] == []


def drift(doc: dict, name: str) -> dict[str, dict]:
    return {f"{c['kind']} {c['key']}".strip(): c for c in doc["drift"] if c["host"] == name}


def test_drift_against_the_previous_audit(tmp_path, capsys, real_report):
    before, after = tmp_path / EARLIER, tmp_path / AUDIT
    (tmp_path / "screenshots").mkdir()  # not an audit folder: never the baseline
    for name in ("stay", "shm", "pil", "broke", "slow", "gone"):
        write(before, name, host(real_report, name))
    for name in ("stay", "new"):
        write(after, name, host(real_report, name))
    resized = host(real_report, "shm")
    next(f for f in resized["checks"][0]["findings"] if f["name"] == "size")["measured"] = 2**26
    write(after, "shm", resized)
    simd = host(real_report, "pil")
    pillow = next(c for c in simd["checks"] if c["id"] == "pillow")["data"]
    pillow["distribution"] = {"name": "pillow-simd", "version": "9.5.0.post2"}
    pillow["avx2_build"] = True
    write(after, "pil", simd)
    write(after, "broke", host(real_report, "broke", fail=["sysctl"]))
    write(after, "slow", host(real_report, "slow", loop=(700.0, 0.01)))  # -30 % > 20 %
    _code, doc = fleet(capsys, after)
    assert doc["baseline"] == {"source": str(before), "kind": "folder", "note": ""}
    assert drift(doc, "stay") == {}
    size = drift(doc, "shm")["value shm.size"]
    assert size["after"] == 2**26 and size["before"] != 2**26
    flavour = drift(doc, "pil")["fact pillow"]
    assert flavour["after"] == "pillow-simd 9.5.0.post2 (AVX2)"
    assert flavour["before"].startswith("pillow ")
    sysctl = drift(doc, "broke")["check sysctl"]
    assert (sysctl["before"], sysctl["after"]) == ("pass", "fail")
    assert sysctl["note"] == "started failing: sysctl is broken"
    assert drift(doc, "broke")["verdict"]["after"] == "fail"
    moved = drift(doc, "slow")["value loop.throughput"]
    assert (moved["before"], moved["after"]) == (1000.0, 700.0)
    assert moved["note"].startswith("-30%")
    assert drift(doc, "new")["new"]["after"] == "pass"
    assert drift(doc, "gone")["gone"]["before"] == "pass"


def test_metric_within_tolerance_is_not_drift_and_tolerance_is_configurable(
    tmp_path, capsys, real_report
):
    write(tmp_path / EARLIER, "a", host(real_report, "a", loop=(1000.0, 0.01)))
    write(tmp_path / AUDIT, "a", host(real_report, "a", loop=(900.0, 0.01)))
    _, doc = fleet(capsys, tmp_path / AUDIT)
    assert drift(doc, "a") == {}
    _, doc = fleet(capsys, tmp_path / AUDIT, "--set", 'fleet.drift.tolerances."loop.*"=0.05')
    assert drift(doc, "a")["value loop.throughput"]["note"].startswith("-10%")
    _, doc = fleet(capsys, tmp_path / AUDIT, "--no-baseline")
    assert doc["drift"] == [] and doc["baseline"]["note"] == "not compared (--no-baseline)"


def test_baseline_may_be_a_saved_fleet_json_or_one_report(tmp_path, capsys, real_report):
    write(tmp_path / EARLIER, "a", host(real_report, "a", loop=(1000.0, 0.01)))
    write(tmp_path / AUDIT, "a", host(real_report, "a", loop=(500.0, 0.01)))
    saved = tmp_path / "saved.json"
    assert main(["fleet", str(tmp_path / EARLIER), "--report", f"json:{saved}"]) == 0
    capsys.readouterr()
    for baseline, kind in ((saved, "fleet"), (tmp_path / EARLIER / "a.json", "report")):
        _, doc = fleet(capsys, tmp_path / AUDIT, "--baseline", baseline)
        assert doc["baseline"]["kind"] == kind
        assert drift(doc, "a")["value loop.throughput"]["before"] == 1000.0


def test_earliest_audit_has_no_baseline(tmp_path, capsys, real_report):
    write(tmp_path / AUDIT, "a", host(real_report, "a"))
    _, doc = fleet(capsys, tmp_path / AUDIT)
    assert doc["baseline"]["source"] is None
    assert doc["baseline"]["note"] == "no earlier audit folder next to this one"


def test_previous_audit_is_read_from_its_saved_summary_only_while_it_is_current(
    tmp_path, capsys, real_report
):
    before = tmp_path / EARLIER
    write(before, "a", host(real_report, "a", loop=(1000.0, 0.01)))
    write(tmp_path / AUDIT, "a", host(real_report, "a", loop=(500.0, 0.01)))
    summary = before / ".fleet.json"
    assert main(["fleet", str(before), "--report", f"json:{summary}"]) == 0
    capsys.readouterr()
    _, doc = fleet(capsys, tmp_path / AUDIT)
    assert doc["baseline"]["kind"] == "fleet"
    assert drift(doc, "a")["value loop.throughput"]["before"] == 1000.0
    later = write(before, "b", host(real_report, "b"))  # the folder changed after the summary
    os.utime(later, (summary.stat().st_mtime + 5,) * 2)
    _, doc = fleet(capsys, tmp_path / AUDIT)
    assert doc["baseline"]["kind"] == "folder"
    assert drift(doc, "b")["gone"]["before"] == "pass"


def test_the_table_names_each_hosts_os(tmp_path, capsys, real_report):
    audit = tmp_path / AUDIT
    for name, pretty in (("node1", "Debian GNU/Linux 13 (trixie)"), ("node2", "Rocky Linux 9.5")):
        doc = host(real_report, name)
        doc["host"]["os"] = {"pretty_name": pretty}
        write(audit, name, doc)
    write(audit, "node3", marker("node3"))
    main(["fleet", str(audit), "--format", "table"])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert "Debian GNU/Linux 13 (trixie)" in rows["node1"]
    assert "Rocky Linux 9.5" in rows["node2"]
    assert "UNREACHABLE" in rows["node3"]
