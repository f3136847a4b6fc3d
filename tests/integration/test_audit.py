"""playbooks/audit.yml on a sandbox fleet provisioned with site.yml: one host misconfigured
(a 16 MiB /dev/shm, stock Pillow in place of pillow-simd) and one powered off. The audit names
exactly those hosts and reasons, writes nothing on the hosts but its report, and a second audit
after site.yml fixed the broken host shows the fix as drift. Also: the markers for timed-out
and report-less hosts under --limit and strategy free, bad audit variables stopped before
anything runs, and the hostcheck role's systemd timer (listed by systemd; its service,
started, writes a Prometheus textfile that parses)."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.ansible import COLLECTION_PREFIX, run_playbook
from tests.integration.converged import converged_fleet

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "playbooks/audit.yml",
    "playbooks/files/*",
    "hostcheck/fleet/*",
    "hostcheck/report/*",
    "roles/hostcheck/*",
    "plugins/*/hostcheck_*",
    "tests/integration/converged.py",
)

pytestmark = pytest.mark.integration
AUDIT = "playbooks/audit.yml"
VENV = "/opt/venvs/train"
MiB = 2**20
STOCK_PILLOW = "11.3.0"
UNITS = "/etc/systemd/system"
REFERENCE = "/run/audit-reference"  # touched before the first audit
# What the audit's checks need to pass here; sysctl_tuning changes nothing live in the sandbox
# (the kernel is this machine's) and its check only warns, so it is left out to save time.
CONVERGE_TAGS = "shm,ulimits,pillow_simd,hostcheck"


def sh(fleet, host, command: str) -> str:
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stderr}"
    return done.stdout.strip()


def audits(reports: Path) -> list[Path]:
    return sorted(p for p in reports.iterdir() if p.is_dir())


def fleet_json(folder: Path) -> dict:
    return json.loads((folder / ".fleet.json").read_text())


def by_host(document: dict) -> dict[str, dict]:
    return {entry["host"]: entry for entry in document["hosts"]}


def all_messages(run) -> str:
    hosts = {h for play in run.output.get("plays", []) for t in play["tasks"] for h in t["hosts"]}
    return " ".join(m for h in sorted(hosts) for m in run.messages(h)) + run.stderr


@pytest.fixture(scope="module")
def converged(make_fleet):
    """Three hosts, two of them provisioned by site.yml with the hostcheck timer on (booted
    from converged layers where a run on this machine kept them: tests/integration/
    converged.py); node3 is powered off before the first audit and stays off, so it is not
    provisioned. pip does not byte-compile here (the sandbox's default): the converge's own
    hostcheck run writes the .pyc files of what hostcheck imports, and the audit's run imports
    no more, so it writes none (the pillow put on node2 below is compiled as it goes in)."""
    return converged_fleet(
        make_fleet,
        "audit",
        3,
        "site.yml",
        tags=CONVERGE_TAGS,
        limit=["node1", "node2"],
        extra_vars={"hostcheck_timer_enabled": True},
    )


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reports")


@pytest.fixture(scope="module")
def first_audit(converged, reports):
    fleet = converged
    node1, node2, node3 = fleet.hosts()
    # node2: a small /dev/shm, and stock Pillow past the pillow_simd role's pip constraint.
    sh(fleet, node2, "mount -o remount,size=16M /dev/shm")
    sh(
        fleet,
        node2,
        f"{VENV}/bin/pip uninstall -y -q pillow-simd pillow && PIP_CONSTRAINT=/dev/null "
        f"{VENV}/bin/pip install -q --compile --no-deps pillow=={STOCK_PILLOW}",
    )
    # The timer is Persistent: a host booted from a layer kept long ago runs the missed
    # hostcheck at once, beside the audit. Stopped for the rest of the module (its test ran
    # above), so that what the audit writes is all that is written on the hosts.
    for host in (node1, node2):
        sh(fleet, host, f"systemctl stop hostcheck.timer hostcheck.service && touch {REFERENCE}")
    time.sleep(1)
    fleet.stop(node3)
    run = run_playbook(
        fleet, AUDIT, extra_vars={"audit_reports_dir": str(reports), "audit_profile": "quick"}
    )
    (folder,) = audits(reports)
    return run, folder


@pytest.fixture(scope="module")
def second_audit(converged, reports, first_audit):
    """node2 fixed the way an operator would: site.yml on it, the roles it needs (the timer
    off there)."""
    fleet = converged
    fix = run_playbook(fleet, "site.yml", limit="node2", tags="shm,pillow_simd,hostcheck")
    assert fix.returncode == 0, fix.messages("node2") or fix.stderr
    run = run_playbook(
        fleet, AUDIT, extra_vars={"audit_reports_dir": str(reports), "audit_profile": "quick"}
    )
    folder = audits(reports)[-1]
    assert folder != first_audit[1]
    return run, folder, fix


def test_timer_units_are_written_and_their_command_writes_a_prom_file(converged):
    fleet = converged
    node1 = fleet.hosts()[0]
    service = sh(fleet, node1, f"cat {UNITS}/hostcheck.service")
    timer = sh(fleet, node1, f"cat {UNITS}/hostcheck.timer")
    assert "Type=oneshot" in service and "SuccessExitStatus=1" in service
    assert "OnCalendar=*:0/15" in timer and "RandomizedDelaySec=120" in timer
    (line,) = [x for x in service.splitlines() if x.startswith("ExecStart=")]
    argv = shlex.split(line.removeprefix("ExecStart="))
    prom = "/var/lib/node_exporter/textfile_collector/hostcheck.prom"
    assert argv[:4] == [f"{VENV}/bin/hostcheck", "run", "--profile", "quick"]
    assert f"prom:{prom}" in argv and "json:/var/lib/hostcheck/timer.json" in argv
    assert argv[6:8] == ["--config", "/etc/hostcheck/config.yaml"]

    # systemd runs the timer, and its service writes the textfile when started
    listed = sh(fleet, node1, "systemctl list-timers --all --no-legend hostcheck.timer")
    assert "hostcheck.timer" in listed and "hostcheck.service" in listed
    assert sh(fleet, node1, "systemctl is-enabled hostcheck.timer") == "enabled"
    assert sh(fleet, node1, "systemctl is-active hostcheck.timer") == "active"
    sh(fleet, node1, f"rm -f {prom}")
    done = fleet.ssh(node1, "systemctl start hostcheck.service")
    assert done.returncode == 0, done.stderr
    result = sh(fleet, node1, "systemctl show -p Result -p ExecMainStatus hostcheck.service")
    status = int(dict(line.split("=", 1) for line in result.split())["ExecMainStatus"])
    assert status in (0, 1), result
    families = {f.name: f for f in text_string_to_metric_families(sh(fleet, node1, f"cat {prom}"))}
    (exit_code,) = families["hostcheck_exit_code"].samples
    assert exit_code.value == status
    assert "hostcheck_last_run_timestamp_seconds" in families
    checks = {s.labels["check"] for s in families["hostcheck_check_status"].samples}
    assert {"shm", "pillow", "ulimits"} <= checks
    info = families["hostcheck_info"].samples[0].labels
    assert info["profile"] == "quick"


def test_first_audit_names_the_misconfigured_and_the_stopped_host(converged, first_audit):
    fleet = converged
    run, folder = first_audit
    node3 = fleet.hosts()[2]
    assert run.returncode != 0
    assert "hostcheck fleet exit 1" in all_messages(run)
    document = fleet_json(folder)
    hosts = by_host(document)
    assert document["exit_code"] == 1 and set(hosts) == {"node1", "node2", "node3"}
    # node1 is healthy: its only problems are the sandbox's warnings (2 cores, this machine's
    # sysctl values), which fail nothing
    assert hosts["node1"]["verdict"] == "warn"
    assert set(hosts["node1"]["reasons"]) <= {"cpu", "sysctl"}
    assert hosts["node2"]["verdict"] == "fail"
    assert sorted(hosts["node2"]["reasons"]) == ["pillow", "shm"]
    assert hosts["node2"]["values"]["shm.size"] == 16 * MiB
    assert hosts["node2"]["facts"]["pillow"].startswith(f"pillow {STOCK_PILLOW}")
    assert hosts["node3"]["state"] == hosts["node3"]["verdict"] == "unreachable"
    assert node3.address in hosts["node3"]["reason"]
    # what is in the folder: two reports, one marker, the fleet's own outputs
    assert json.loads((folder / "node1.json").read_text())["schema_version"] == 1
    assert json.loads((folder / "node2.json").read_text())["host"]["hostname"] == "node2"
    marker = json.loads((folder / "node3.json").read_text())
    assert marker["kind"] == "hostcheck-audit-marker" and marker["state"] == "unreachable"
    assert (folder / "fleet.html").is_file()
    # the table is shown in the play
    (shown,) = run.task_results("Show the fleet's verdict").values()
    assert "node2  FAIL" in shown["msg"] and "node3  UNREACHABLE" in shown["msg"]


def test_the_audit_writes_nothing_on_the_hosts_but_its_report(converged, first_audit):
    fleet = converged
    _, folder = first_audit
    for host in fleet.hosts()[:2]:
        written = sh(
            fleet,
            host,
            f"find / -xdev -newer {REFERENCE} -type f -not -path '/proc/*' "
            # journald records the audit's SSH logins, as on every host with systemd
            "-not -path '/run/*' -not -path '/tmp/*' -not -path '/var/log/journal/*'",
        ).split()
        assert written == [f"/var/lib/hostcheck/audit/{folder.name}.json"], host.name


def test_second_audit_shows_the_fix_as_drift(converged, first_audit, second_audit):
    fleet = converged
    run, folder, _ = second_audit
    document = fleet_json(folder)
    hosts = by_host(document)
    assert document["baseline"]["source"] == str(first_audit[1])
    assert document["baseline"]["kind"] == "fleet"  # read from the first audit's .fleet.json
    assert hosts["node2"]["verdict"] == "warn"
    assert not {"shm", "pillow"} & set(hosts["node2"]["reasons"])
    drift = {(d["kind"], d["key"]): d for d in document["drift"] if d["host"] == "node2"}
    assert drift["verdict", ""]["before"] == "fail" and drift["verdict", ""]["after"] == "warn"
    for check in ("shm", "pillow"):
        assert (drift["check", check]["before"], drift["check", check]["after"]) == ("fail", "pass")
    pillow = drift["fact", "pillow"]
    assert pillow["before"].startswith(f"pillow {STOCK_PILLOW}")
    assert pillow["after"].startswith("pillow-simd ")
    size = drift["value", "shm.size"]
    assert size["before"] == 16 * MiB and size["after"] > 64 * MiB
    assert not [d for d in document["drift"] if d["host"] == "node1"]
    # still failing: node3 is still off
    assert run.returncode != 0 and hosts["node3"]["verdict"] == "unreachable"
    # site.yml ran on node2 with the timer off: its units are gone, node1's stay
    node1, node2, _ = fleet.hosts()
    assert fleet.ssh(node2, f"ls {UNITS}/hostcheck.service").returncode != 0
    assert fleet.ssh(node1, f"ls {UNITS}/hostcheck.service").returncode == 0


def test_the_converge_that_fixed_node2_saw_the_drift_and_verified_the_repair(second_audit):
    """site.yml on a provisioned host is the cheap no-op path (each role validated once, read
    once): a /dev/shm remounted smaller and stock Pillow in the venv still get repaired, and
    verified, in that run."""
    fix = second_audit[2]
    changed = [name.removeprefix(COLLECTION_PREFIX) for name in fix.changed_tasks("node2")]
    assert "shm : Apply the size to the mounted /dev/shm" in changed, changed
    assert [name for name in changed if name.startswith("pillow_simd : ")], changed
    shm = fix.task_results("shm : Compare with shm_size")["node2"]
    assert shm["msg"].startswith("/dev/shm is ") and not shm.get("skipped"), shm
    pillow = fix.task_results("pillow_simd : Verify pillow-simd (changes nothing)")["node2"]
    assert not pillow.get("skipped") and not pillow.get("failed"), pillow
    assert "with libjpeg-turbo" in pillow["msg"], pillow


@pytest.mark.parametrize(
    ("variables", "state", "reason"),
    [
        # the group's profile (default) runs the loop and benchmarks: seconds, not 2
        (
            {"audit_timeout": 2, "audit_strategy": "free"},
            "timeout",
            "did not finish within audit_timeout (2 s)",
        ),
        ({"hostcheck_venv": "/nonexistent"}, "no-report", "hostcheck is not installed"),
    ],
)
def test_limit_records_timeouts_and_missing_hostcheck_as_markers(
    converged, tmp_path, variables, state, reason
):
    fleet = converged
    node1 = fleet.hosts()[0]
    run = run_playbook(
        fleet, AUDIT, limit="node1", extra_vars={"audit_reports_dir": str(tmp_path), **variables}
    )
    assert run.returncode != 0
    (folder,) = audits(tmp_path)
    assert sorted(p.name for p in folder.glob("[!.]*.json")) == ["node1.json"]
    marker = json.loads((folder / "node1.json").read_text())
    assert marker["state"] == state and reason in marker["reason"]
    assert by_host(fleet_json(folder))["node1"]["verdict"] == state
    if state == "timeout":  # hostcheck was stopped on the host, workers and all
        deadline = time.monotonic() + 15
        while fleet.ssh(node1, "pgrep -f 'bin/[h]ostcheck'").returncode == 0:
            assert time.monotonic() < deadline, "hostcheck still runs after the time limit"
            time.sleep(0.5)


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"audit_timeout": 0}, "audit_timeout"),
        ({"audit_timeout": "soon"}, "audit_timeout"),
        ({"audit_profile": "fast"}, "audit_profile: one of default, gpu-node, quick"),
        ({"audit_strategy": "random"}, "audit_strategy"),
        ({"audit_fleet_args": ["--format", "json"]}, "audit_fleet_args"),
        ({"audit_host_dir": "audit"}, "audit_host_dir"),
    ],
)
def test_bad_audit_variables_stop_before_anything_runs(converged, tmp_path, variables, named):
    run = run_playbook(
        converged, AUDIT, extra_vars={"audit_reports_dir": str(tmp_path / "r"), **variables}
    )
    assert run.returncode != 0
    assert named in all_messages(run)
    assert not (tmp_path / "r").exists()
    assert not run.task_results("Run hostcheck")
