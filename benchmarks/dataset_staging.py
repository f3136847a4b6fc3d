#!/usr/bin/env python3
"""Copy and verification throughput of the dataset_stage module (role dataset_staging) next to
what the same file system does for dd and cat: a sparse image file, loop-attached, ext4.

    sudo .venv/bin/python benchmarks/dataset_staging.py [--files 64] [--file-mib 8]
        [--image-gib 2] [--checksum sha256] [--repeat 1] [--cold-source]

Copies run with parallel 1 and 4, with and without the read-back of each written file, next to
dd and to a plain copy + fsync + rename per file; the source sits on this machine's own disk
(kept in the page cache unless --cold-source, as dd's zeros are in memory). Verification is a
verify=all rerun hashing every staged file, next to cat of the same files to /dev/null, each
after dropping the page cache; one untimed read first, so that whatever caches below the page
cache (the host of a VM) is equally warm for all of them.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "roles" / "dataset_staging" / "library" / "dataset_stage.py"
MIB = 1 << 20


def load_module():
    spec = importlib.util.spec_from_file_location("dataset_stage", MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def drop_caches(paths: list[Path]) -> str:
    """Empty the page cache (all of it where allowed, else of these files); say how."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as control:
            control.write("3\n")
        return "drop_caches"
    except OSError:
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "fadvise DONTNEED"


def files_below(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def read_all(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb") as handle:
            while handle.read(MIB):
                pass


def make_source(root: Path, files: int, file_mib: int) -> None:
    for number in range(files):
        path = root / f"shard-{number // 16:02d}" / f"part-{number:05d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            for _ in range(file_mib):
                handle.write(os.urandom(MIB))


def hash_in_memory(algorithm: str) -> float:
    """Best of three, MiB/s: the CPU ceiling of one hashing thread."""
    data = os.urandom(32 * MIB)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        hashlib.new(algorithm, data).hexdigest()
        best = min(best, time.perf_counter() - start)
    return 32 / best


def copy_with_fsync(source: Path, files: list[Path], dest: Path) -> None:
    """What a durable copy costs without hashing: copy each file, fsync it, rename it."""
    for path in files:
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(path, temp)
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--file-mib", type=int, default=8)
    parser.add_argument("--image-gib", type=int, default=2)
    parser.add_argument("--checksum", default="sha256")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each row, the best shown")
    parser.add_argument(
        "--cold-source", action="store_true", help="drop the page cache before each copy"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (losetup, mkfs.ext4, mount)", file=sys.stderr)
        return 2
    total_mib = args.files * args.file_mib
    if total_mib * MIB * 1.15 > args.image_gib * (1 << 30):
        print(f"{total_mib} MiB does not fit a {args.image_gib} GiB image", file=sys.stderr)
        return 2
    stage_module = load_module()
    work = Path(tempfile.mkdtemp(prefix="dataset-staging-bench-"))
    image, mount, source = work / "image.ext4", work / "mnt", work / "source"
    dest, state = mount / "dest", mount / "state"
    loop = None
    mounted = False

    def stage(**options) -> dict:
        return stage_module.stage(
            {
                "name": "bench",
                "source": str(source),
                "dest": str(dest),
                "state_dir": str(state),
                "checksum": args.checksum,
                **options,
            }
        )

    def start_clean() -> None:
        for path in (dest, state, mount / "dd.bin"):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        if shutil.which("fstrim"):
            run("fstrim", str(mount))
        if args.cold_source:
            drop_caches(source_files)
        else:
            read_all(source_files)

    try:
        with open(image, "wb") as handle:
            handle.truncate(args.image_gib << 30)
        loop = run("losetup", "--find", "--show", "--direct-io=on", str(image))
        run("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop)
        mount.mkdir()
        run("mount", loop, str(mount))
        mounted = True
        make_source(source, args.files, args.file_mib)
        source_files = files_below(source)
        print(
            f"dataset: {args.files} files x {args.file_mib} MiB = {total_mib} MiB, "
            f"{args.checksum}; dest ext4 on {loop} (--direct-io, {args.image_gib} GiB sparse "
            f"image in {work}); source {'cold' if args.cold_source else 'in the page cache'}; "
            f"best of {args.repeat}\n"
        )
        dd = [
            "dd",
            "if=/dev/zero",
            f"of={mount / 'dd.bin'}",
            "bs=1M",
            f"count={total_mib}",
            "oflag=direct",
            "conv=fsync",
        ]
        best: dict[str, tuple[float, float, float]] = {}

        def keep(label: str, mib_per_s: float, wall: float, cpu: float) -> None:
            if label not in best or mib_per_s > best[label][0]:
                best[label] = (mib_per_s, wall, cpu)

        def measured(action):
            """(wall s, CPU s of this process and its children, what action returned)"""
            cpu, start = sum(os.times()[:4]), time.perf_counter()
            returned = action()
            return time.perf_counter() - start, sum(os.times()[:4]) - cpu, returned

        for _ in range(args.repeat):
            start_clean()
            wall, cpu, _ = measured(lambda: run(*dd))
            keep("dd bs=1M oflag=direct conv=fsync", total_mib / wall, wall, cpu)
            start_clean()
            wall, cpu, _ = measured(lambda: copy_with_fsync(source, source_files, dest))
            keep("copy+fsync+rename per file, no hashing", total_mib / wall, wall, cpu)
            for parallel in (1, 4):
                for verify_written in (True, False):
                    start_clean()
                    wall, cpu, result = measured(
                        lambda p=parallel, v=verify_written: stage(parallel=p, verify_written=v)
                    )
                    assert result["bytes_copied"] == total_mib * MIB, result["summary"]
                    label = f"copy parallel {parallel}, " + (
                        "read-back verified" if verify_written else "no read-back"
                    )
                    keep(label, result["copy_mib_per_s"], wall, cpu)
        writes = dict(best)
        dd_rate = writes["dd bs=1M oflag=direct conv=fsync"][0]
        print(f"{'write':44} {'MiB/s':>8} {'wall s':>7} {'CPU s':>6} {'vs dd':>6}")
        for label, (mib_per_s, wall, cpu) in writes.items():
            print(f"{label:44} {mib_per_s:8.1f} {wall:7.2f} {cpu:6.2f} {mib_per_s / dd_rate:6.2f}")

        staged = files_below(dest)
        how = drop_caches(staged)
        read_all(staged)
        best.clear()
        for _ in range(args.repeat):
            drop_caches(staged)
            wall, cpu, _ = measured(
                lambda: subprocess.run(
                    ["cat", *map(str, staged)], stdout=subprocess.DEVNULL, check=True
                )
            )
            keep("cat > /dev/null", total_mib / wall, wall, cpu)
            for parallel in (1, 4):
                drop_caches(staged)
                wall, cpu, result = measured(lambda p=parallel: stage(parallel=p, verify="all"))
                assert result["files_verified"] == args.files and result["files_copied"] == 0
                label = f"verify=all parallel {parallel} (hash dest)"
                keep(label, result["verify_mib_per_s"], wall, cpu)
        cat_rate = best["cat > /dev/null"][0]
        heading = f"read, page cache emptied ({how})"
        print(f"\n{heading:44} {'MiB/s':>8} {'wall s':>7} {'CPU s':>6} {'vs cat':>6}")
        for label, (mib_per_s, wall, cpu) in best.items():
            print(f"{label:44} {mib_per_s:8.1f} {wall:7.2f} {cpu:6.2f} {mib_per_s / cat_rate:6.2f}")
        print(
            "\nmodule rows: MiB/s of its copy or hashing phase (copy_mib_per_s, verify_mib_per_s),"
            " wall and CPU of the whole run"
        )
        print(
            f"{args.checksum} in memory, one thread: {hash_in_memory(args.checksum):.0f} MiB/s; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
        )
    finally:
        if mounted and subprocess.run(["umount", str(mount)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
