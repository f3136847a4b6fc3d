#!/usr/bin/env python3
"""What hostcheck job's watcher spends on the host figures (hostcheck/job/host_use.py): the
CPU time of one `Sampler.sample` over N real processes holding F open files each, per
process, and what that comes to at the watcher's rate (every 0.25 s) in share of one core.

    .venv/bin/python benchmarks/job_host_sample.py [--processes 1 10 34] [--files 64]
        [--repeat 200]

The processes are children of this script (`sleep` after opening the files), as a job's
training processes and workers are of hostcheck job. The sampler runs in hostcheck job's
own process, not the job's: its cost is CPU the job does not get on a busy host, not time
added to a step.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hostcheck.job import host_use
from hostcheck.job.runner import SAMPLE_EVERY_S

HOLDER = textwrap.dedent(
    """
    import sys, time
    kept = [open(sys.executable, "rb") for _ in range(int(sys.argv[1]))]
    print("ready", flush=True)
    time.sleep(600)
    """
)


def measure(processes: int, files: int, repeat: int) -> float:
    """CPU seconds of one sample of all the processes."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(files)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(processes)
    ]
    try:
        for child in children:
            child.stdout.readline()
        known = {child.pid: psutil.Process(child.pid) for child in children}
        sampler = host_use.Sampler()
        sampler.sample(known)
        began = time.process_time()
        for _ in range(repeat):
            sampler.sample(known)
        return (time.process_time() - began) / repeat
    finally:
        for child in children:
            child.kill()
            child.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 10, 34])
    parser.add_argument("--files", type=int, default=64, help="open files each process holds")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(
        f"{'processes':>9} {'files each':>10} | {'us a sample':>11} {'us a process':>12} "
        f"| {'core share at 4 Hz':>18}"
    )
    for count in args.processes:
        seconds = measure(count, args.files, args.repeat)
        print(
            f"{count:>9} {args.files:>10} | {seconds * 1e6:>11.0f} {seconds * 1e6 / count:>12.0f} "
            f"| {seconds / SAMPLE_EVERY_S:>18.2%}"
        )
    print(
        "\nCPU time (this process's) of one Sampler.sample over all the processes: num_fds, "
        "the soft RLIMIT_NOFILE, the CPU affinity and /proc/PID/io of each; the share is "
        f"of one core at one sample every {SAMPLE_EVERY_S} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
