"""Time `hostcheck fleet` on a generated audit of many hosts (budget: 10,000 in 5 s).

Takes one real report of this machine (`hostcheck run`, default profile: with the loop
check, about 35 KB), makes N copies with varied hosts, hardware, values and statuses, plus
the previous audit next to it (the default baseline), a few unreachable hosts and broken
files, then times the command end to end (a subprocess, table to /dev/null) and in-process:
without a baseline, with the previous audit's reports re-read, and with the previous
audit's saved summary (`.fleet.json`, which the audit playbook writes).

    .venv/bin/python benchmarks/fleet_scale.py            # 10,000 hosts
    .venv/bin/python benchmarks/fleet_scale.py --hosts 2000 --report existing.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

BUDGET_S = 5.0
HARDWARE = [
    ("NVIDIA H100 80GB HBM3", 8, "AMD EPYC 9654 96-Core Processor"),
    ("NVIDIA A100-SXM4-80GB", 8, "AMD EPYC 7763 64-Core Processor"),
    ("NVIDIA L40S", 4, "Intel(R) Xeon(R) Gold 6448Y"),
]


def real_report(path: str | None) -> dict:
    if path:
        with open(path) as handle:
            return json.load(handle)
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "run", "--report", "json:-"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"hostcheck run failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def varied(report: dict, index: int, rng: random.Random, day: int) -> dict:
    doc = copy.deepcopy(report)
    doc["host"]["hostname"] = f"gpu{index:05d}"
    model, count, cpu_model = HARDWARE[index % len(HARDWARE)]
    for check in doc["checks"]:
        if check["id"] == "gpu":
            check["data"]["gpus"] = [{"index": i, "name": model} for i in range(count)]
            check["data"]["driver_version"] = "550.54.15" if index % 97 or day == 0 else "535.1"
        if check["id"] == "cpu":
            check["data"]["model"] = cpu_model
        for finding in check["findings"]:
            value = finding["measured"]
            if isinstance(value, float):
                finding["measured"] = round(value * rng.gauss(1.0, 0.03), 4)
        if check["id"] == "loop" and index % 500 == 7:  # a slow host now and then
            for finding in check["findings"]:
                if finding["name"] == "throughput":
                    finding["measured"] = round(finding["measured"] / 10, 1)
        if index % 50 == 3 and check["id"] == "shm":
            check["status"] = "fail"
    return doc


def generate(folder: str, report: dict, hosts: int, day: int) -> None:
    os.makedirs(folder)
    rng = random.Random(day)
    for index in range(hosts):
        path = os.path.join(folder, f"gpu{index:05d}.json")
        if index % 1000 == 11:  # unreachable
            marker = {
                "kind": "hostcheck-audit-marker",
                "host": f"gpu{index:05d}",
                "state": "unreachable",
                "reason": "ssh: connect to host: No route to host",
            }
            text = json.dumps(marker)
        elif index % 1000 == 13:  # truncated
            text = json.dumps(report)[:2000]
        else:
            text = json.dumps(varied(report, index, rng, day), indent=2)
        with open(path, "w") as handle:
            handle.write(text)


def timed_subprocess(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"hostcheck fleet failed: {done.stderr.strip()}")
    return time.perf_counter() - start, done.returncode


def timed_in_process(folder: str, baseline: str | None) -> float:
    from hostcheck.commands.common import profile_schema
    from hostcheck.config import load_profile
    from hostcheck.fleet.analyze import Baseline, analyze
    from hostcheck.fleet.load import default_jobs, read_folders
    from hostcheck.fleet.settings import FleetSettings

    start = time.perf_counter()
    settings = FleetSettings.from_profile(load_profile("default", profile_schema()).values)
    read = read_folders([folder] + ([baseline] if baseline else []), default_jobs())
    base = Baseline(baseline, "folder", read[1].entries) if baseline else None
    report = analyze(folder, read[0].entries, settings, base)
    assert len(report.entries) > 0
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--report", help="a real report to copy (default: run hostcheck now)")
    parser.add_argument("--keep", action="store_true", help="keep the generated folders")
    args = parser.parse_args()
    report = real_report(args.report)
    size = len(json.dumps(report, indent=2))
    root = tempfile.mkdtemp(prefix="fleet-scale-")
    previous = os.path.join(root, "20260101T000000Z")
    current = os.path.join(root, "20260102T000000Z")
    try:
        began = time.perf_counter()
        generate(previous, report, args.hosts, 0)
        generate(current, report, args.hosts, 1)
        print(
            f"generated 2 audits of {args.hosts} hosts ({size / 1000:.0f} KB a report) in "
            f"{time.perf_counter() - began:.1f} s under {root}"
        )

        def show(label: str, args: list[str]) -> None:
            seconds, code = timed_subprocess(args)
            verdict = "within" if seconds < BUDGET_S else "OVER"
            print(
                f"hostcheck fleet, {label}: {seconds:.2f} s end to end, "
                f"{args_hosts / seconds:,.0f} reports/s, exit {code} ({verdict} {BUDGET_S:.0f} s)"
            )

        args_hosts = args.hosts
        show("no baseline", [current, "--no-baseline"])
        show("previous audit re-read (no saved summary)", [current])
        summary = os.path.join(previous, ".fleet.json")
        show("previous audit, saving its summary", [previous, "--report", f"json:{summary}"])
        show("previous audit from its saved .fleet.json (default)", [current])
        show("the same, --format json", [current, "--format", "json"])
        show("the same, --format html", [current, "--format", "html"])
        for label, baseline in (("no baseline", None), ("with the previous audit", previous)):
            seconds = timed_in_process(current, baseline)
            print(
                f"in-process read + analyze, {label}: {seconds:.2f} s, "
                f"{args.hosts / seconds:,.0f} reports/s"
            )
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
