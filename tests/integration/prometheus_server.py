"""A real Prometheus (Debian's package) on this machine for the monitoring tests: its own
configuration, storage and port, scraping the sandbox hosts' node_exporters with the shipped
rules loaded; read through its HTTP API."""

from __future__ import annotations

import datetime
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Prometheus:
    def __init__(
        self,
        folder: Path,
        targets: Sequence[str],
        rule_files: Sequence[Path] = (),
        interval_s: float = 2,
    ) -> None:
        self.folder = folder
        self.interval_s = interval_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {
                "scrape_interval": f"{interval_s}s",
                "evaluation_interval": f"{interval_s}s",
            },
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {"job_name": "node", "static_configs": [{"targets": list(targets)}]}
            ],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Prometheus:
        program = shutil.which("prometheus") or "/usr/bin/prometheus"
        log = open(self.folder / "prometheus.log", "wb")  # noqa: SIM115 - the server writes it
        self.process = subprocess.Popen(
            [program, f"--config.file={self.folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.wait(lambda: self._ready(), "ready", timeout)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> object:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def alerts(self, name_prefix: str = "") -> list[dict]:
        return [
            a
            for a in self.api("alerts")["alerts"]
            if a["labels"]["alertname"].startswith(name_prefix)
        ]

    def wait_for_evaluations(self, timeout: float = 30) -> float:
        """Until every rule group has been evaluated twice from now: a recording rule's new
        value has reached the alerts of every group, and an alert whose expression holds is
        listed, pending, by then."""
        now = time.time()

        def evaluated_twice() -> bool:
            groups = self.api("rules")["groups"]
            return bool(groups) and all(
                last_evaluation(group) >= now + self.interval_s for group in groups
            )

        return self.wait(evaluated_twice, "the rules evaluated twice", timeout)

    def wait(self, ready: Callable[[], object], what: str, timeout: float) -> float:
        """Until ready() is truthy; how long that took."""
        start = time.monotonic()
        while not ready():
            if self.process and self.process.poll() is not None:
                log = (self.folder / "prometheus.log").read_text(errors="replace")
                raise RuntimeError(f"prometheus exited {self.process.returncode}:\n{log[-3000:]}")
            if time.monotonic() - start > timeout:
                raise AssertionError(f"not {what} after {timeout:.0f} s")
            time.sleep(0.5)
        return time.monotonic() - start


class TextfileTarget:
    """A scrape target on this machine serving what read() returns at each scrape: a sandbox
    host's textfile as it is on the host now, where node_exporter is not installed (its
    textfile collector is tested with the real node_exporter in test_monitoring.py)."""

    def __init__(self, read: Callable[[], str]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = read().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def last_evaluation(group: dict) -> float:
    """A rule group's lastEvaluation from /api/v1/rules (RFC 3339 with nanoseconds; year 1
    before its first evaluation) in Unix seconds."""
    return datetime.datetime.fromisoformat(group["lastEvaluation"]).timestamp()


def textfiles_to_openmetrics(snapshots: Sequence[tuple[float, dict[tuple[str, str], str]]]) -> str:
    """node_exporter textfiles as one OpenMetrics input for `promtool tsdb create-blocks-from
    openmetrics`: per snapshot (Unix seconds, {(job, instance): textfile}), every sample
    stamped with its time and labelled with its target, as a scrape would have stored it."""
    families: dict[str, list[str]] = {}
    for at, textfiles in sorted(snapshots, key=lambda snapshot: snapshot[0]):
        for (job, instance), text in textfiles.items():
            target = f'job="{job}",instance="{instance}"'
            for line in text.splitlines():
                if not line or line.startswith("#"):
                    continue
                name_and_labels, value = line.rsplit(" ", 1)
                name, _, labels = name_and_labels.partition("{")
                labels = f"{target},{labels}" if labels else f"{target}}}"
                families.setdefault(name, []).append(f"{name}{{{labels} {value} {at:.3f}")
    lines = []
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines += samples
    return "\n".join(lines) + "\n# EOF\n"


def prometheus_over(folder: Path, openmetrics: str) -> Prometheus:
    """A Prometheus serving these samples (TSDB blocks made by promtool), scraping nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "samples.om"
    source.write_text(openmetrics)
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(source),
         str(folder / "data")],
        check=True, capture_output=True,
    )  # fmt: skip
    source.unlink()
    return Prometheus(folder, []).start()
