"""The command line, run in-process and as a real subprocess on this machine."""

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from hostcheck.cli import main
from hostcheck.commands.common import profile_schema
from hostcheck.config import PROFILE_NAMES, load_profile
from hostcheck.registry import CHECKS
from tests.paths import CHECKOUT as REPO

SCHEMA = json.loads(resources.files("hostcheck.report").joinpath("report-v1.json").read_text())
QUICK = ["run", "--profile", "quick"]


def run_cli(*args, cwd=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hostcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_builtin_profiles_are_complete_and_valid(name):
    profile = load_profile(name, profile_schema())
    assert set(profile.values["checks"]) == set(CHECKS)


def test_gpu_node_requires_a_gpu_and_quick_runs_no_benchmark():
    assert load_profile("gpu-node", profile_schema()).require_gpu is True
    quick = load_profile("quick", profile_schema())
    assert quick.section("pillow")["benchmark_seconds"] == 0


def test_every_check_has_an_explanation_and_a_role():
    for spec in CHECKS.values():
        assert len(spec.explain) > 80, spec.id
        assert spec.roles, spec.id


def test_json_report_to_stdout_validates(tmp_path):
    done = run_cli(*QUICK, "--report", "json:-", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["exit_code"] == done.returncode
    assert [c["id"] for c in report["checks"]] == list(CHECKS)
    assert "verdict:" in done.stderr  # the table moved to standard error


def test_the_quick_run_imports_only_what_it_needs():
    """No YAML parser (hostcheck/compiled/profiles.py), no report writers without --report,
    no importlib.metadata (the gpu check reads torch's METADATA itself), no emoji table."""
    unneeded = (
        "yaml",
        "jsonschema",
        "torch",
        "importlib.metadata",
        "importlib.resources",
        "hostcheck.report.writers",
        "rich._emoji_codes",
    )
    probe = (
        "import json, sys; from hostcheck.cli import main\n"
        "main(['run', '--profile', 'quick'])\n"
        f"print(json.dumps(sorted(m for m in {unneeded!r} if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert json.loads(done.stdout.splitlines()[-1]) == [], done.stderr


def test_several_reports_at_once(tmp_path):
    paths = {kind: tmp_path / f"r.{kind}" for kind in ("json", "junit", "prom")}
    args = [a for kind, p in paths.items() for a in ("--report", f"{kind}:{p}")]
    done = run_cli(*QUICK, *args, "-v", "--user", "root", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert "login of root" in done.stdout  # sources with [brackets] print as text
    assert json.loads(paths["json"].read_text())["profile"]["name"] == "quick"
    assert paths["junit"].read_text().startswith("<?xml")
    assert "hostcheck_check_status{" in paths["prom"].read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.junit", "r.prom"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--set", "shm.min_size=150%"],
            "--set shm.min_size: shm.min_size: a percentage of RAM must be above 0%",
        ),
        (["run", "--set", "shm.colour=blue"], "--set shm.colour: shm.colour: unknown key"),
        (["run", "--profile", "nosuch"], "nosuch: no such profile or file"),
        (["run", "--check", "gpus"], "--check gpus: no such check"),
        (["run", "--report", "xml:out.xml"], "--report xml:out.xml: expected FORMAT:PATH"),
        (["run", "--report", "json:/nonexistent/dir/r.json"], "directory /nonexistent/dir"),
        (["run", "--workers", "many"], "argument --workers: invalid int value"),
        (["run", "--batch-bytes", "big"], "--set shm.loader.batch_bytes"),
        (["explain", "nosuch"], "explain nosuch: no such check"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_usage_errors_are_one_line_and_exit_two(tmp_path, args, message):
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_config_file_names_file_and_key(tmp_path):
    bad = tmp_path / "site.yaml"
    bad.write_text("checks:\n  ulimits:\n    min_memlock_soft: lots\n")
    done = run_cli("run", "--config", str(bad))
    assert done.returncode == 2
    assert f"{bad}: ulimits.min_memlock_soft: not a size or 'unlimited': 'lots'" in done.stderr


def test_fail_on_warn_turns_a_warning_into_exit_one(tmp_path):
    # 1 byte of free space is always there; asking for all of RAM free in /dev/shm warns
    sets = ["--set", "shm.min_size=1", "--set", "shm.min_free=1000TiB"]
    base = run_cli("run", "--check", "shm", *sets, "--report", "json:-")
    assert json.loads(base.stdout)["checks"][0]["status"] == "warn"
    assert base.returncode == 0
    strict = run_cli("run", "--check", "shm", *sets, "--fail-on", "warn")
    assert strict.returncode == 1


def test_failing_check_exits_one(tmp_path):
    done = run_cli("run", "--check", "shm", "--set", "shm.min_size=1000TiB", "--report", "json:-")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["verdict"] == "fail"
    assert "shm_size" in report["checks"][0]["remedy"]


def test_list_and_explain(capsys):
    assert main(["list", "--profile", "gpu-node"]) == 0
    out = capsys.readouterr().out
    for check_id in CHECKS:
        assert check_id in out
    assert "min_size" in out
    assert main(["explain", "shm"]) == 0
    out = capsys.readouterr().out
    assert "SIGBUS" in out and "shm.min_size" in out


def test_profiles_on_disk_are_plain_yaml_with_comments():
    for name in PROFILE_NAMES:
        path = REPO / "hostcheck" / "profiles" / f"{name}.yaml"
        text = path.read_text()
        assert yaml.safe_load(text)
        assert "#" in text, f"{name}.yaml should say what its keys mean"


def test_writes_nothing_but_the_reports(tmp_path):
    """Every file the run opens for writing, every change and every program it starts."""
    log = tmp_path / "audit.json"
    reports = tmp_path / "out"
    reports.mkdir()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "support" / "audit_writes.py"),
            str(log),
            "--",
            "run",
            "--report",
            f"json:{reports / 'r.json'}",
            "--report",
            f"prom:{reports / 'r.prom'}",
            "--dataset-path",
            str(REPO / "hostcheck"),
            "--user",
            "root",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    audit = json.loads(log.read_text())
    writes = [path for kind, path in audit["events"] if kind == "write"]
    outside = [
        p
        for p in writes
        if not p.startswith(str(reports) + "/") and p not in (str(log), os.devnull)
    ]
    assert outside == []
    assert any(p.endswith(".tmp") for p in writes)  # the atomic rename was seen
    changes = [
        e
        for e in audit["events"]
        if e[0].startswith(("os.", "shutil."))
        and e[0] not in ("os.exec", "os.posix_spawn", "os.fork", "os.system", "os.spawn")
    ]
    assert all(str(reports) in json.dumps(args) for _, args in changes), changes
    started = " ".join(str(args) for kind, args in audit["events"] if kind == "subprocess.Popen")
    for forbidden in ("sysctl -w", "mount ", "modprobe", "tee ", "echo "):
        assert forbidden not in started
    assert sorted(p.name for p in reports.iterdir()) == ["r.json", "r.prom"]


def test_set_reaches_a_dotted_sysctl_name():
    done = run_cli(
        "run",
        "--check",
        "sysctl",
        "--set",
        'sysctl.expect."vm.swappiness".max=100',
        "--set",
        'sysctl.expect."vm.max_map_count".min=1',
        "--report",
        "json:-",
    )
    report = json.loads(done.stdout)
    expect = report["profile"]["values"]["checks"]["sysctl"]["expect"]
    assert expect["vm.swappiness"] == {"max": 100}
    swappiness = [f for f in report["checks"][0]["findings"] if f["name"] == "vm.swappiness"]
    assert swappiness[0]["status"] == "pass"


def test_reuse_measurements_keeps_the_real_loop_until_the_profile_changes(tmp_path):
    report = tmp_path / "report.json"
    # severity warn: a loop slowed by a busy machine warns, and a warning is kept like a pass
    shape = ["--set", "loop.seconds=1", "--set", "loop.severity=warn"]
    args = ["run", "--reuse-measurements", str(report), "--report", f"json:{report}"]
    wide = {**os.environ, "COLUMNS": "1000"}  # rich wraps its lines at the terminal's width
    first = run_cli(*args, *shape, cwd=tmp_path, env=wide)
    assert first.returncode in (0, 1), first.stderr
    measured = json.loads(report.read_text())
    jsonschema.validate(measured, SCHEMA)
    assert f"measured: storage, pillow, dcgm, loop (no earlier report at {report})" in first.stdout

    second = run_cli(*args, *shape, cwd=tmp_path, env=wide)
    kept = json.loads(report.read_text())
    jsonschema.validate(kept, SCHEMA)
    before = {c["id"]: c for c in measured["checks"]}
    after = {c["id"]: c for c in kept["checks"]}
    assert "measured_at" in after["loop"]["data"], second.stdout
    assert after["loop"]["findings"] == before["loop"]["findings"]
    assert after["loop"]["data"]["measured_at"] == measured["started_at"]
    assert after["loop"]["duration_s"] == 0 < before["loop"]["duration_s"]
    assert "measurements kept from" in second.stdout

    third = run_cli(*args, *shape, "--set", "loop.batch_size=32", cwd=tmp_path, env=wide)
    again = {c["id"]: c for c in json.loads(report.read_text())["checks"]}
    assert "measured_at" not in again["loop"]["data"]
    assert "(the profile changed)" in third.stdout


def test_record_basis_writes_what_the_measurements_depend_on(tmp_path):
    report = tmp_path / "report.json"
    done = run_cli(*QUICK, "--record-basis", "--report", f"json:{report}")
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(report.read_text())
    basis = document["measurement_basis"]
    assert basis["profile"]["checks"]["shm"] == document["profile"]["values"]["checks"]["shm"]
    assert basis["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    plain = tmp_path / "plain.json"
    run_cli(*QUICK, "--report", f"json:{plain}")
    assert "measurement_basis" not in json.loads(plain.read_text())
