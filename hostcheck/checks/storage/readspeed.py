"""A timed read of a sample of a dataset's files, past the page cache where the file system
allows it (O_DIRECT into a page-aligned buffer). Read only: files are opened O_RDONLY, with
O_NOATIME where permitted so that reading does not even update access times; caches are never
dropped."""

from __future__ import annotations

import errno
import mmap
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

PAGE = mmap.PAGESIZE
O_DIRECT = getattr(os, "O_DIRECT", 0)
O_NOATIME = getattr(os, "O_NOATIME", 0)
MAX_ERRORS = 10  # errors kept in the result; the count goes on


@dataclass
class Sample:
    files: list[tuple[Path, int]]  # (path, size in bytes), in the order found
    scanned: int  # regular non-empty files looked at
    complete: bool  # the whole tree was scanned (not stopped by scan_limit)
    errors: list[str] = field(default_factory=list)


@dataclass
class ReadResult:
    files: int = 0  # files read (at least partly)
    bytes: int = 0
    seconds: float = 0.0
    direct_bytes: int = 0  # read with O_DIRECT, past the page cache
    buffered_bytes: int = 0  # read through the page cache (may have come from RAM)
    no_bypass_reason: str | None = None  # why the page cache was not bypassed
    tails_buffered: int = 0  # files whose unaligned tail O_DIRECT refused and we read buffered
    atime_untouched: bool = True  # every file opened with O_NOATIME
    stopped_by: str | None = None  # max_bytes or max_seconds, when a limit ended the read
    error_count: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def bytes_per_s(self) -> float | None:
        if self.bytes == 0 or self.seconds <= 0:
            return None
        return self.bytes / self.seconds

    @property
    def cache_bypassed(self) -> bool:
        """O_DIRECT was used for the reads (a refused unaligned tail aside)."""
        return self.no_bypass_reason is None and self.direct_bytes > 0

    def error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(text)

    def to_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            "bytes_per_s": None if self.bytes_per_s is None else round(self.bytes_per_s),
            "files_per_s": round(self.files / self.seconds, 1) if self.seconds > 0 else None,
            "cache_bypassed": self.cache_bypassed,
            "direct_bytes": self.direct_bytes,
            "buffered_bytes": self.buffered_bytes,
            "no_bypass_reason": self.no_bypass_reason,
            "tails_buffered": self.tails_buffered,
            "atime_untouched": self.atime_untouched,
            "stopped_by": self.stopped_by,
            "error_count": self.error_count,
            "errors": list(self.errors),
        }


def sample_files(root: Path, max_files: int, scan_limit: int, seed: int = 0) -> Sample:
    """Up to `max_files` regular non-empty files under `root`, picked at random (fixed seed,
    so a rerun reads the same files) among the first `scan_limit` found. Directory order is
    the file system's own (no sorting, so a huge flat directory is not listed in full).
    Directory symlinks are not followed; file symlinks are (dataset caches use them)."""
    found: list[tuple[Path, int]] = []
    errors: list[str] = []
    complete = True
    if root.is_file():
        size = root.stat().st_size
        return Sample([(root, size)] if size > 0 else [], 1, True)
    stack = [root]
    while stack and complete:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                        continue
                    try:
                        if not entry.is_file(follow_symlinks=True):
                            continue
                        size = entry.stat(follow_symlinks=True).st_size
                    except OSError:
                        continue  # a dangling symlink
                    if size > 0:
                        found.append((Path(entry.path), size))
                    if len(found) >= scan_limit:
                        complete = False
                        break
        except OSError as exc:
            errors.append(f"{directory}: {exc.strerror or exc}")
    picked = found
    if len(found) > max_files:
        indexes = sorted(random.Random(seed).sample(range(len(found)), max_files))
        picked = [found[i] for i in indexes]
    return Sample(picked, len(found), complete, errors)


def _open(path: Path, extra: int, result: ReadResult) -> int:
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | extra
    if O_NOATIME:
        try:
            return os.open(path, flags | O_NOATIME)
        except PermissionError:  # O_NOATIME needs ownership or CAP_FOWNER
            pass
    fd = os.open(path, flags)
    result.atime_untouched = False
    return fd


def _read_one(
    path: Path,
    want: int,
    buf: mmap.mmap,
    result: ReadResult,
    deadline: float,
    clock: Callable[[], float],
) -> None:
    fd = -1
    direct = False
    if O_DIRECT and result.no_bypass_reason is None:
        try:
            fd = _open(path, O_DIRECT, result)
            direct = True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            result.no_bypass_reason = "open with O_DIRECT refused (EINVAL)"
    if fd < 0:
        fd = _open(path, 0, result)
    offset = 0
    block = len(buf)
    try:
        while offset < want:
            if clock() >= deadline:
                result.stopped_by = "max_seconds"
                return
            try:
                count = os.preadv(fd, [buf], offset)
            except OSError as exc:
                if exc.errno != errno.EINVAL or not direct:
                    raise
                if offset == 0:
                    result.no_bypass_reason = "read with O_DIRECT refused (EINVAL)"
                else:
                    result.tails_buffered += 1
                os.close(fd)
                fd = -1
                fd = _open(path, 0, result)
                direct = False
                continue
            if count == 0:
                return
            if offset == 0:
                result.files += 1
            offset += count
            result.bytes += count
            if direct:
                result.direct_bytes += count
                if count < block:  # end of file: the next direct read would be unaligned
                    return
            else:
                result.buffered_bytes += count
    finally:
        if fd >= 0:
            os.close(fd)


def read_files(
    files: list[tuple[Path, int]],
    max_bytes: int,
    block_size: int,
    max_seconds: float,
    clock: Callable[[], float] = time.perf_counter,
) -> ReadResult:
    """Read the files in order, whole, until `max_bytes` or `max_seconds`; time it all
    (opens included, as a data loader pays them too)."""
    block = max(PAGE, -(-block_size // PAGE) * PAGE)  # O_DIRECT wants aligned lengths
    result = ReadResult()
    if not O_DIRECT:
        result.no_bypass_reason = "O_DIRECT is not available on this platform"
    buf = mmap.mmap(-1, block)  # anonymous mappings are page-aligned, as O_DIRECT wants
    start = clock()
    deadline = start + max_seconds
    try:
        for path, size in files:
            if result.bytes >= max_bytes:
                result.stopped_by = "max_bytes"
                break
            if clock() >= deadline:
                result.stopped_by = "max_seconds"
                break
            try:
                _read_one(path, min(size, max_bytes - result.bytes), buf, result, deadline, clock)
            except OSError as exc:
                result.error(f"{path}: {exc.strerror or exc}")
            if result.stopped_by:
                break
    finally:
        result.seconds = clock() - start
        buf.close()
    return result
