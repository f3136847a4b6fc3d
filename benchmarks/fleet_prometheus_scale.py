"""Time `hostcheck fleet --prometheus` on many hosts' series beside `hostcheck fleet` on the
same hosts' report files (goal: 10,000 hosts from Prometheus in at most 10 s).

One real report of this machine (`hostcheck run`), varied per host as benchmarks/
fleet_scale.py varies it, is written as N report files and as N textfiles; the textfiles
become TSDB blocks (`promtool tsdb create-blocks-from openmetrics`, as if node_exporter had
served them) of a Prometheus started on this machine (Debian's package). Both commands run
end to end (a subprocess each, the table to /dev/null), alternately, three times each; the
verdicts of the two are compared host by host.

    .venv/bin/python benchmarks/fleet_prometheus_scale.py              # 10,000 hosts
    .venv/bin/python benchmarks/fleet_prometheus_scale.py --hosts 2000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fleet_scale import real_report, timed_subprocess, varied
from hostcheck.report.writers import render_prom
from tests.integration.prometheus_server import (
    prometheus_over,
    textfiles_to_openmetrics,
)

GOAL_S = 10.0
ROUNDS = 3


def verdicts(*args: str) -> tuple[dict, list]:
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", "--format", "json", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    document = json.loads(done.stdout)
    return {h["host"]: h["verdict"] for h in document["hosts"]}, document["outliers"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--report", help="a real report to copy (default: run hostcheck now)")
    args = parser.parse_args()
    report = real_report(args.report)
    root = Path(tempfile.mkdtemp(prefix="fleet-prometheus-"))
    folder = root / "reports"
    folder.mkdir()
    at = time.time() - 300
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    rng = random.Random(1)
    prometheus = None
    try:
        began = time.perf_counter()
        textfiles = {}
        for index in range(args.hosts):
            document = varied(report, index, rng, 1)
            document["started_at"] = stamp
            host = f"gpu{index:05d}"
            (folder / f"{host}.json").write_text(json.dumps(document))
            textfiles[("node", host)] = render_prom(document)
        series = sum(text.count("\n") - text.count("\n#") for text in textfiles.values())
        prometheus = prometheus_over(
            root / "prometheus", textfiles_to_openmetrics([(at, textfiles)])
        )
        print(
            f"{args.hosts} hosts, {series:,} series, written and loaded into Prometheus in "
            f"{time.perf_counter() - began:.0f} s"
        )
        from_files, from_prometheus = [], []
        served_args = ("--prometheus", prometheus.url, "--at", f"{at:.3f}")
        for _ in range(ROUNDS):
            from_files.append(timed_subprocess([str(folder), "--no-baseline"])[0])
            from_prometheus.append(timed_subprocess(list(served_args))[0])
        same = verdicts(str(folder), "--no-baseline") == verdicts(*served_args)
        files_s, served_s = statistics.median(from_files), statistics.median(from_prometheus)
        print(f"hostcheck fleet DIR (report files):     median {files_s:.2f} s of {ROUNDS}")
        print(
            f"hostcheck fleet --prometheus URL:       median {served_s:.2f} s of {ROUNDS} "
            f"({'within' if served_s <= GOAL_S else 'OVER'} the {GOAL_S:.0f} s goal)"
        )
        print(f"Prometheus / files: {served_s / files_s:.2f}; same verdicts and outliers: {same}")
    finally:
        if prometheus is not None:
            prometheus.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
