#!/usr/bin/env python3
"""Time to bring up 1, 4 and 16 sandbox hosts, and what one host costs in memory and disk.

    sudo .venv/bin/python benchmarks/sandbox_up.py [--sizes 1 4 16] [--cold]

--cold first builds the root file system into an empty cache (mmdebstrap) and prints that
time; without it the cached root is used (built once if missing, time printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.sandbox import rootfs
from tests.sandbox.fleet import Fleet


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def namespace_pss_kib(init_pid: int) -> int:
    """Proportional memory of every process in the host's PID namespace."""
    try:
        namespace = os.readlink(f"/proc/{init_pid}/ns/pid")
    except OSError:
        return 0
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                    total += pss_kib(int(entry))
            except OSError:
                continue
    return total


def disk_kib(path: str) -> int:
    done = subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=False)
    return int(done.stdout.split()[0]) if done.stdout else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root", file=sys.stderr)
        return 2
    if args.cold:
        scratch = Path(tempfile.mkdtemp(prefix="sandbox-cold-"))
        start = time.monotonic()
        rootfs.ensure_rootfs(scratch, log=lambda message: None)
        print(f"cold cache: root file system built in {time.monotonic() - start:.1f} s")
        shutil.rmtree(scratch)
    fleet = Fleet(instance="bench", log=lambda message: None)
    start = time.monotonic()
    rootfs.ensure_rootfs(fleet.shared_cache, log=print)
    print(f"warm cache check: {time.monotonic() - start:.2f} s\n")
    print(
        f"{'hosts':>5} {'up s':>7} {'s/host':>7} {'down s':>7} {'MiB RAM/host':>13} "
        f"{'MiB disk/host':>14}"
    )
    for size in args.sizes:
        start = time.monotonic()
        hosts = fleet.up(size)
        up = time.monotonic() - start
        ram = sum(namespace_pss_kib(h.init_pid) for h in hosts if h.init_pid) / size / 1024
        disk = sum(disk_kib(h.folder) for h in hosts) / size / 1024
        start = time.monotonic()
        fleet.down(quiet=True)
        down = time.monotonic() - start
        print(f"{size:5} {up:7.2f} {up / size:7.3f} {down:7.2f} {ram:13.1f} {disk:14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
