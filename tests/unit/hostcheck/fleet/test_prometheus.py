"""`hostcheck fleet --prometheus`: the same verdict, outliers and drift as `hostcheck fleet` on
the report files of the same runs. Each run's report is written twice, as the JSON report and
as the timer's textfile; the textfiles are loaded into a real Prometheus (Debian's package;
TSDB blocks made by `promtool tsdb create-blocks-from openmetrics`), as if node_exporter had
served them, at two instants ten minutes apart."""

from __future__ import annotations

import copy
import json
import shutil
import socket
import subprocess
import sys
import time

import pytest

from hostcheck.report.writers import render_prom
from tests.integration.prometheus_server import prometheus_over, textfiles_to_openmetrics

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus and promtool are not installed (make test installs Debian's prometheus)",
)
HOSTS = [f"gpu{index}" for index in range(1, 7)]
NOW = time.time()
EARLIER, LATER = NOW - 1200, NOW - 600


def fleet(*args: str) -> tuple[int, dict | None, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    document = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, document, done.stderr


def finding(document: dict, check_id: str, name: str) -> dict:
    check = next(c for c in document["checks"] if c["id"] == check_id)
    return next(f for f in check["findings"] if f["name"] == name)


def variant(report: dict, host: str, later: bool) -> dict:
    """Six hosts alike but for: gpu2's /dev/shm far smaller (an outlier, and failing), gpu3
    with a DataLoader settings file, and later gpu4 with other THP settings and a failing
    memory check (drift)."""
    document = copy.deepcopy(report)
    document["host"]["hostname"] = host
    if host == "gpu2":
        for name in ("size", "free"):
            finding(document, "shm", name)["measured"] = 1 << 26
        finding(document, "shm", "size")["status"] = "fail"
        shm = next(c for c in document["checks"] if c["id"] == "shm")
        shm["status"], shm["summary"] = "fail", "size 64.0 MiB < 1.0 GiB"
    if host == "gpu3":
        loader = next(c for c in document["checks"] if c["id"] == "dataloader")
        loader["data"].update(
            state="ok",
            num_workers=6,
            pin_memory=True,
            prefetch_factor=4,
            persistent_workers=True,
            prefetcher=False,
        )
    if host == "gpu4" and later:
        finding(document, "memory", "thp enabled")["measured"] = "always"
        memory = next(c for c in document["checks"] if c["id"] == "memory")
        memory["status"], memory["summary"] = "fail", "ram 1.0 GiB < 2.0 GiB"
    return document


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    """Report folders of two audits (EARLIER, LATER) with their markers, and a Prometheus
    holding the same runs' textfiles and the targets' `up`."""
    folder = tmp_path_factory.mktemp("fleet")
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "run", "--profile", "quick", "--report", "json:-"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    snapshots = []
    for at, name in ((EARLIER, "earlier"), (LATER, "later")):
        audit_folder = folder / name
        audit_folder.mkdir()
        textfiles = {}
        for host in HOSTS:
            document = variant(report, host, later=at == LATER)
            document["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
            (audit_folder / f"{host}.json").write_text(json.dumps(document))
            textfiles[("node", host)] = render_prom(document) + "up 1\n"
        # gpu7: node_exporter up, no hostcheck series; gpu8: not scraped
        textfiles[("node", "gpu7")] = "up 1\n"
        textfiles[("node", "gpu8")] = "up 0\n"
        for host, state in (("gpu7", "no-report"), ("gpu8", "unreachable")):
            marker = {"kind": "hostcheck-audit-marker", "host": host, "state": state}
            (audit_folder / f"{host}.json").write_text(json.dumps(marker))
        snapshots.append((at, textfiles))
    prometheus = prometheus_over(folder / "prometheus", textfiles_to_openmetrics(snapshots))
    yield folder, prometheus
    prometheus.stop()


def comparable_hosts(document: dict) -> dict:
    """Each host as fleet's JSON shows it, less where it was read from and the words: the
    markers' (the audit writes its reason, Prometheus has only `up`) and the checks' (a report
    says why a check failed in words, Prometheus which findings failed: no text in labels)."""
    hosts = {}
    for host in document["hosts"]:
        shown = {k: v for k, v in host.items() if k not in ("file", "reason", "problems")}
        shown["problems"] = sorted(host["problems"])
        hosts[host["host"]] = shown
    return hosts


def test_the_same_hosts_verdict_and_outliers_as_the_report_files(audit):
    folder, prometheus = audit
    from_files = fleet(str(folder / "later"), "--no-baseline")
    from_prometheus = fleet("--prometheus", prometheus.url, "--at", f"{LATER:.3f}")
    (code, files, err), (code_p, served, err_p) = from_files, from_prometheus
    assert (code, code_p) == (1, 1), err + err_p
    assert comparable_hosts(served) == comparable_hosts(files)
    assert served["hosts"][1]["values"]["shm.size"] == 1 << 26
    # a failing finding in its unit (hostcheck_finding_value{unit="bytes"}), as the report shows it
    assert served["hosts"][1]["problems"]["shm"] == "size 64.0 MiB"
    assert files["hosts"][1]["problems"]["shm"].startswith("size 64.0 MiB")
    assert [h["verdict"] for h in served["hosts"]][-2:] == ["no-report", "unreachable"]
    assert (served["verdicts"], served["exit_code"]) == (files["verdicts"], files["exit_code"])
    assert served["checks"] == files["checks"]
    assert served["outliers"] == files["outliers"] != []
    assert {o["host"] for o in served["outliers"]} == {"gpu2"}
    assert served["hosts"][2]["dataloader"]["num_workers"] == 6


def test_the_same_drift_as_the_earlier_audit(audit):
    folder, prometheus = audit
    code, files, err = fleet(str(folder / "later"), "--baseline", str(folder / "earlier"))
    code_p, served, err_p = fleet(
        "--prometheus", prometheus.url, "--at", f"{LATER:.3f}", "--baseline-at", "10m"
    )
    assert (code, code_p) == (1, 1), err + err_p

    def changes(document):  # the note quotes each value's display, which reports alone keep
        return [{k: v for k, v in c.items() if k != "note"} for c in document["drift"]]

    assert changes(served) == changes(files)
    assert {(c["host"], c["kind"], c["key"]) for c in served["drift"]} >= {
        ("gpu4", "check", "memory"),
        ("gpu4", "value", "memory.thp enabled"),
    }


def test_the_table_names_the_server_and_the_instant(audit):
    _, prometheus = audit
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", "--prometheus", prometheus.url, "--at",
         f"{LATER:.3f}", "--selector", 'job="node"', "--host-label", "hostname"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(LATER))
    assert f"8 hosts in {prometheus.url} at {moment}" in done.stdout
    assert "drift: not compared (no --baseline-at)" in done.stdout
    rows = [line.split()[:2] for line in done.stdout.splitlines() if line.startswith("gpu")]
    assert rows[:3] == [["gpu1", "FAIL"], ["gpu2", "FAIL"], ["gpu3", "FAIL"]], done.stdout


def test_every_output_format_from_prometheus(audit, tmp_path):
    _, prometheus = audit
    outputs = {kind: tmp_path / f"fleet.{kind}" for kind in ("html", "jsonl", "junit", "prom")}
    code, document, err = fleet(
        "--prometheus", prometheus.url, "--at", f"{LATER:.3f}",
        *(f"--report={kind}:{path}" for kind, path in outputs.items()),
    )  # fmt: skip
    assert code == 1, err
    assert document["directory"].startswith(prometheus.url)
    assert document["baseline"] == {
        "source": None,
        "kind": None,
        "note": "not compared (no --baseline-at)",
    }
    assert "<td>gpu2</td>" in outputs["html"].read_text()
    assert len(outputs["jsonl"].read_text().splitlines()) > len(HOSTS)
    assert outputs["junit"].read_text().count("<testsuite ") == 8  # a suite a host
    assert 'hostcheck_fleet_hosts{verdict="no-report"} 1' in outputs["prom"].read_text()


def listening_silently() -> tuple[socket.socket, str]:
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server, f"http://127.0.0.1:{server.getsockname()[1]}"


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_no_server_no_answer_and_no_hostcheck_series_exit_2_with_one_line(audit):
    folder, prometheus = audit
    silent, silent_url = listening_silently()
    with silent:
        cases = [
            (("--prometheus", "prometheus:9090"), "not an http:// or https:// URL"),
            (("--prometheus", closed_port()), "cannot connect: [Errno 111] Connection refused"),
            (("--prometheus", silent_url, "--timeout", "1"), "no answer within 1 s"),
            (("--prometheus", prometheus.url, "--selector", 'job="gpu"'), "no hostcheck series"),
            (("--prometheus", prometheus.url, "--at", "yesterday"), "--at: 'yesterday' is not"),
            (
                ("--prometheus", prometheus.url, "--at", "2h", "--baseline-at", f"{NOW:.0f}"),
                "--baseline-at must be earlier than --at",
            ),
            (("--prometheus", prometheus.url, "--selector", "job=node"), "HTTP 400"),
            (("--prometheus", prometheus.url, str(folder)), "no DIR or --baseline with it"),
            ((str(folder / "later"), "--at", "1h"), "--at needs --prometheus"),
            ((), "give an audit folder DIR or --prometheus URL"),
        ]
        for args, said in cases:
            code, document, err = fleet(*args)
            assert (code, document) == (2, None), (args, err)
            assert err.count("\n") == 1 and said in err, (args, err)
