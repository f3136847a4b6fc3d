#!/usr/bin/env python3
"""What reading the kernel log for Xid events costs (hostcheck/gpu/events.py): a 10 MB log in
/dev/kmsg's record format read whole (the first read of a boot), and the same log read again
after 1 KB was appended (every later read: from the position kept), side by side in one run.

    .venv/bin/python benchmarks/gpu_events_read.py [--megabytes 10] [--repeats 7]

Prints the best and median wall and CPU time of each; the goal (issue 42) is at most 50 ms for
a 10 MB log read since the last position. /dev/kmsg itself holds far less (the kernel's ring
buffer is 128 KiB to a few MiB), and this machine's is read last for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hostcheck.gpu import events
from hostcheck.system import System

XID = "NVRM: Xid (PCI:0000:1a:00): 79, pid=2001, name=python, GPU has fallen off the bus."


def timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def report(name: str, samples: list[tuple[float, float]]) -> None:
    walls = [w * 1000 for w, _ in samples]
    cpus = [c * 1000 for _, c in samples]
    print(
        f"{name:44s} wall best {min(walls):7.1f} ms median {statistics.median(walls):7.1f} ms"
        f"   cpu best {min(cpus):7.1f} ms median {statistics.median(cpus):7.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        log = root / "var/log/kmsg"
        log.parent.mkdir(parents=True)
        (root / "proc/sys/kernel/random").mkdir(parents=True)
        (root / events.BOOT_ID.lstrip("/")).write_text("bench\n")
        lines, size, seq = [], 0, 0
        while size < args.megabytes * 1e6:
            seq += 1
            line = f"6,{seq},{seq * 10},-;eth0: link up, 100Gbps, full duplex, rx/tx {seq}\n"
            lines.append(line)
            size += len(line)
        seq += 1
        lines.append(f"3,{seq},{seq * 10},-;{XID}\n")
        log.write_text("".join(lines))
        system = System(root=root)
        state = "/var/lib/hostcheck/gpu-events.json"

        def whole():
            (root / state.lstrip("/")).unlink(missing_ok=True)
            read = events.read_since_boot(system, "/var/log/kmsg", state)
            assert read.new == 1, read

        def since_position():
            nonlocal seq
            with open(log, "a") as handle:
                for _ in range(10):
                    seq += 1
                    handle.write(f"6,{seq},{seq * 10},-;{'x' * 90}\n")
            read = events.read_since_boot(system, "/var/log/kmsg", state)
            assert read.new == 0 and read.events, read

        print(f"log: {log.stat().st_size / 1e6:.1f} MB, {seq} records, one Xid")
        report("first read of the boot (whole log)", [timed(whole) for _ in range(args.repeats)])
        whole()
        report(
            "read since the last position (+1 KB)",
            [timed(since_position) for _ in range(args.repeats)],
        )
    if os.access(events.KMSG, os.R_OK):
        report(
            "this machine's /dev/kmsg, whole, no state",
            [
                timed(lambda: events.read_since_boot(System(), events.KMSG, None))
                for _ in range(args.repeats)
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
