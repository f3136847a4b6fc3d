"""--reuse-measurements: the loop and the benchmarks are kept only while nothing they depend on
changed. Checks here are small stand-ins reading a fake host, so each run is counted."""

import json

import pytest

from hostcheck import __version__
from hostcheck.checks.base import CheckSpec, RunOptions
from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.report.document import build_document
from hostcheck.reuse import BOOT_ID, run_reusing


class Stand:
    """A settings check (shm, read from files of the fake host) and two measuring checks
    (pillow's benchmark, the loop) that count how often they measured."""

    def __init__(self):
        self.measured = {"pillow": 0, "loop": 0}
        self.loop_status = Status.PASS

    def shm(self, ctx):
        size = int(ctx.system.read("/etc/shm-size"))
        free = int(ctx.system.read("/etc/shm-free"))
        return CheckResult.from_findings(
            "shm", [Finding("size", Status.PASS, size), Finding("free", Status.PASS, free)]
        )

    def pillow(self, ctx):
        findings = [Finding("distribution", Status.PASS, ctx.system.read("/etc/pillow"))]
        if ctx.config["benchmark_seconds"] > 0:
            self.measured["pillow"] += 1
            findings.append(Finding("resize rate", Status.PASS, 600 + self.measured["pillow"]))
        return CheckResult.from_findings("pillow", findings)

    def loop(self, ctx):
        self.measured["loop"] += 1
        rate = 400.0 + self.measured["loop"]
        return CheckResult.from_findings("loop", [Finding("throughput", self.loop_status, rate)])

    def registry(self):
        return {
            name: CheckSpec(name, name, "", getattr(self, name), {})
            for name in ("shm", "pillow", "loop")
        }


@pytest.fixture
def host(fake_host):
    fake_host.file("/etc/shm-size", str(8 << 30))
    fake_host.file("/etc/shm-free", str(8 << 30))
    fake_host.file("/etc/pillow", "pillow-simd 9.5.0")
    fake_host.file(BOOT_ID, "0b1c\n")
    return fake_host


@pytest.fixture
def stand():
    return Stand()


def run(host, stand, report, profile_name="default", assignments=()):
    profile = load_profile(profile_name, profile_schema(), assignments=assignments)
    outcome, reuse = run_reusing(
        profile, RunOptions(), host.system(), str(report), None, checks=stand.registry()
    )
    document = build_document(outcome, outcome.exit_code(), None)
    document["measurement_basis"] = reuse.basis
    report.write_text(json.dumps(document))
    return {c["id"]: c for c in document["checks"]}, reuse, document


def test_first_run_measures_and_the_second_keeps_what_it_measured(host, stand, tmp_path):
    report = tmp_path / "report.json"
    first, reuse, document = run(host, stand, report)
    assert stand.measured == {"pillow": 1, "loop": 1}
    assert reuse.measured == ["pillow", "loop"] and not reuse.kept
    assert reuse.why == f"no earlier report at {report}"
    assert first["loop"]["findings"][0]["measured"] == 401.0

    second, reuse, _ = run(host, stand, report)
    assert stand.measured == {"pillow": 1, "loop": 1}  # nothing measured again
    assert reuse.kept == {"pillow": document["started_at"], "loop": document["started_at"]}
    assert second["loop"]["findings"] == first["loop"]["findings"]
    assert second["pillow"]["findings"][1] == first["pillow"]["findings"][1]  # resize rate
    assert second["loop"]["data"]["measured_at"] == document["started_at"]
    assert second["loop"]["summary"].endswith("nothing it depends on changed since)")
    assert "measurements kept from" in reuse.lines()[0]

    third, _, _ = run(host, stand, report)  # kept again: the time of the measurement stays
    assert third["loop"]["data"]["measured_at"] == document["started_at"]
    assert third["loop"]["summary"].count("measured ") == 1
    assert stand.measured == {"pillow": 1, "loop": 1}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda host: host.file("/etc/shm-size", str(2 << 30)), "shm.size: -75%"),
        (lambda host: host.file("/etc/pillow", "pillow 11.0.0"), "pillow.distribution"),
        (lambda host: host.file(BOOT_ID, "77aa\n"), "the host rebooted"),
    ],
    ids=["shm remounted smaller", "pillow replaced", "reboot"],
)
def test_a_changed_setting_measures_again_and_says_what_changed(host, stand, tmp_path, change, why):
    report = tmp_path / "report.json"
    run(host, stand, report)
    change(host)
    checks, reuse, _ = run(host, stand, report)
    assert stand.measured == {"pillow": 2, "loop": 2}
    assert reuse.measured == ["pillow", "loop"] and not reuse.kept
    assert why in reuse.why
    assert "measured_at" not in checks["loop"]["data"]
    assert checks["loop"]["findings"][0]["measured"] == 402.0


def test_what_changes_with_every_job_does_not_count(host, stand, tmp_path):
    report = tmp_path / "report.json"
    run(host, stand, report)
    host.file("/etc/shm-free", str(1 << 30))  # shm.free: drift tolerance null in the profile
    _, reuse, _ = run(host, stand, report)
    assert stand.measured == {"pillow": 1, "loop": 1}
    assert set(reuse.kept) == {"pillow", "loop"}


def test_another_profile_measures_again(host, stand, tmp_path):
    report = tmp_path / "report.json"
    run(host, stand, report)
    _, reuse, _ = run(host, stand, report, assignments=["loop.seconds=5"])
    assert stand.measured["loop"] == 2
    assert reuse.why == "the profile changed"


def test_a_failed_measurement_is_taken_again_and_a_passing_one_kept(host, stand, tmp_path):
    report = tmp_path / "report.json"
    stand.loop_status = Status.FAIL
    run(host, stand, report)
    stand.loop_status = Status.PASS
    checks, reuse, _ = run(host, stand, report)
    assert stand.measured == {"pillow": 1, "loop": 2}
    assert list(reuse.kept) == ["pillow"] and reuse.measured == ["loop"]
    assert reuse.why == "loop did not pass last time"
    assert checks["loop"]["status"] == "pass"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "unreadable"),
        (json.dumps({"schema_version": 1, "tool": {"version": "0.0.1"}}), "another hostcheck"),
        (json.dumps({"schema_version": 1, "tool": {"version": __version__}}), "no measurement"),
        (json.dumps([1, 2]), "not a hostcheck report"),
    ],
)
def test_an_earlier_report_that_cannot_serve_means_measuring(host, stand, tmp_path, content, why):
    report = tmp_path / "report.json"
    report.write_text(content)
    _, reuse, _ = run(host, stand, report)
    assert stand.measured == {"pillow": 1, "loop": 1}
    assert why in reuse.why


def test_measuring_anew_records_the_basis_the_next_run_keeps(host, stand, tmp_path):
    """hostcheck run --record-basis (the role's hostcheck_measure: always): measured although
    an earlier report would stand, with what the measurements depend on recorded for the next
    --reuse-measurements run and the Slurm health check."""
    report = tmp_path / "report.json"
    run(host, stand, report)
    profile = load_profile("default", profile_schema())
    outcome, reuse = run_reusing(
        profile, RunOptions(), host.system(), None, None, checks=stand.registry()
    )
    assert reuse.why == "asked to measure anew"
    assert stand.measured == {"pillow": 2, "loop": 2}
    document = build_document(outcome, outcome.exit_code(), None)
    document["measurement_basis"] = reuse.basis
    report.write_text(json.dumps(document))
    _, kept, _ = run(host, stand, report)
    assert stand.measured == {"pillow": 2, "loop": 2}
    assert set(kept.kept) == {"pillow", "loop"}
