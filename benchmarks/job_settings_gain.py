#!/usr/bin/env python3
"""What the measured DataLoader setting gains real training scripts: the ImageFolder and the
two-rank DDP job scripts (tests/jobs/) with their author's settings against
`--hostcheck-settings`, after `hostcheck loop --sweep --write` measured a matching workload
on this host.

For each script: one run of the author's settings under `hostcheck job` gives the step (its
compute per batch) and the data-wait; the sweep runs the loop with that step and the script's
samples (ImageFolder: its JPEG tree decoded and cropped, batch 32, one rank; DDP: 5 ms
sleeping samples, batch 32, two ranks) and writes the settings file into a temporary folder,
which $HOSTCHECK_DATALOADER names for the runs with --hostcheck-settings. Then the two
settings alternate, bare (no hostcheck job), and the script's own epoch times give samples/s:
printed before and after, with the ratio.

    .venv/bin/python benchmarks/job_settings_gain.py [--rounds 3] [--scripts imagefolder,ddp]
        [--shared]

It runs in a session of its own with a larger CPU share (benchmarks/isolate.py) unless
--shared is given. The ImageFolder script runs with one torch thread, as in the tests (a GPU
step leaves the cores to the loading; here the step takes one of two).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # isolate
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.jobs

import isolate

from tests.jobs import imagefolder_tree, scripts


def workloads(names: list[str]) -> dict[str, dict]:
    """name -> the script's command, environment and the sweep's workload options."""
    known = {}
    if "imagefolder" in names:
        tree = imagefolder_tree.build()
        known["imagefolder"] = {
            "command": lambda *flags: scripts.imagefolder_command(tree, *flags),
            "env": scripts.imagefolder_environment,
            "sweep": ["--sample", "jpeg", "--dataset-path", str(tree), "--ranks", "1"],
            "batch": scripts.IMAGE_BATCH,
        }
    if "ddp" in names:
        known["ddp"] = {
            "command": scripts.ddp_command,
            "env": lambda extra=None: scripts.environment(extra),
            "sweep": ["--sample", "sleep", "--sample-cost-us", "5000", "--ranks", "2"],
            "batch": 32,
        }
    unknown = [name for name in names if name not in ("imagefolder", "ddp")]
    if unknown:
        raise SystemExit(f"unknown scripts: {', '.join(unknown)} (known: imagefolder, ddp)")
    return known


def run(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=scripts.REPO, env=env, capture_output=True, text=True, check=False
    )


def samples_per_s(argv: list[str], env: dict) -> float:
    done = run(argv, env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    samples, seconds = scripts.throughput(done.stdout)
    return samples / seconds


def first_loader(report: Path) -> dict:
    return json.loads(report.read_text())["job"]["ranks"][0]["loaders"][0]


def shown(kwargs: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in kwargs.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each setting")
    parser.add_argument("--scripts", default="imagefolder,ddp", help="comma-separated")
    parser.add_argument("--shared", action="store_true", help="no session of its own")
    args = parser.parse_args()
    if not args.shared:
        code = isolate.rerun_isolated()
        if code is not None:
            return code
    from hostcheck import dataloader

    print(f"{os.cpu_count()} CPUs; CPU share: {isolate.share()}")
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for name, work in workloads(args.scripts.split(",")).items():
            report = Path(folder) / f"{name}-author.json"
            job = [sys.executable, "-m", "hostcheck", "job", "--report", f"json:{report}", "--"]
            run(job + work["command"](), work["env"]())
            author = first_loader(report)
            step_ms = author["compute_s_per_batch"] * 1000
            settings_path = Path(folder) / f"{name}-dataloader.json"
            sweep = [sys.executable, "-m", "hostcheck", "loop", "--sweep", *work["sweep"]]
            sweep += ["--batch-size", str(work["batch"]), "--step-ms", f"{step_ms:.1f}"]
            done = run([*sweep, "--write", str(settings_path)], scripts.environment())
            if not settings_path.is_file():
                raise SystemExit(f"the sweep wrote no settings file: {done.stdout[-2000:]}")
            env = work["env"]({dataloader.ENV_VAR: str(settings_path)})
            ranks = 2 if name == "ddp" else 1
            chosen = dataloader.settings(ranks, path=settings_path)
            print(
                f"\n{name}: the author's DataLoader({shown(author['settings'])}) under hostcheck "
                f"job: data-wait {author['data_wait_fraction']:.1%}, compute "
                f"{step_ms:.1f} ms a batch; the sweep (--step-ms {step_ms:.1f}) wrote "
                f"DataLoader({shown(chosen)}) for {ranks} rank(s)"
            )
            if dataloader.load(settings_path).prefetcher:
                print(
                    "  the sweep measured that setting with a prefetcher (the next batch "
                    "loaded while the step runs), which this script does not have"
                )
            before, after = [], []
            for round_ in range(args.rounds):
                pair = [("author", work["command"](), work["env"]())]
                pair.append(("hostcheck", work["command"]("--hostcheck-settings"), env))
                for which, argv, environment in pair if round_ % 2 == 0 else pair[::-1]:
                    rate = samples_per_s(argv, environment)
                    (before if which == "author" else after).append(rate)
            before_sps, after_sps = statistics.median(before), statistics.median(after)
            each = " ".join(f"{a / b:.2f}x" for b, a in zip(before, after))
            print(
                f"  samples/s: author {before_sps:.1f}, --hostcheck-settings {after_sps:.1f}: "
                f"{after_sps / before_sps:.2f}x (each round: {each})"
            )
            results.append((name, before_sps, after_sps))
    print(f"\n{'script':<12} | {'author sps':>10} {'hostcheck':>10} | {'ratio':>6}")
    for name, before_sps, after_sps in results:
        print(f"{name:<12} | {before_sps:10.1f} {after_sps:10.1f} | {after_sps / before_sps:5.2f}x")
    print(
        f"\nsamples/s: what the scripts print (their epoch times), medians of {args.rounds} "
        "runs of each setting, alternating, without hostcheck job."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
