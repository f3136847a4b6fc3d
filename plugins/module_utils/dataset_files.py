"""The file handling of the dataset_stage module (plugins/modules/dataset_stage.py): reading in
large sequential chunks and hashing, writing under a temporary name that is renamed into place
once complete (atomic_write, and the copies of plugins/module_utils/dataset_copy.py), walking a
tree, and running work on a few files at once. Standard library only: it runs on the hosts."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

BUFFER_BYTES = 1 << 20
MIB = float(1 << 20)
STAGING_TEMP = re.compile(r"\A\..+\.staging-[0-9a-z]{8}\Z", re.DOTALL)
NAME_MAX = 255
NOTHING_LEFT = object()


class StagingError(Exception):
    """A failure to report in one line; `result` holds what was done before it."""

    def __init__(self, message: str, result: dict | None = None) -> None:
        super().__init__(message)
        self.result = result or {}


def rate(count: int, seconds: float) -> float:
    return round(count / MIB / seconds, 1) if count and seconds > 0 else 0.0


def walk(root: str, skip: str | None = None):
    """(relative path, DirEntry) of every entry below `root` that is not a directory; symlinks
    to directories are entries, not followed."""
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if entry.path != skip:
                        pending.append(rel)
                else:
                    yield rel, entry


def hash_file(path: str, algorithm: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return hash_descriptor(fd, algorithm)
    finally:
        os.close(fd)


def hash_descriptor(fd: int, algorithm: str) -> str:
    """Hash what can be read from `fd` (from its current offset to the end)."""
    digest = hashlib.new(algorithm)
    for chunk in chunks(fd):
        digest.update(chunk)
    return digest.hexdigest()


def chunks(fd: int):
    """What can be read from `fd` to its end, sequentially, as views of one reused buffer."""
    buffer = bytearray(BUFFER_BYTES)
    view = memoryview(buffer)
    advise(fd, "POSIX_FADV_SEQUENTIAL")
    with open(fd, "rb", buffering=0, closefd=False) as reader:
        while True:
            count = reader.readinto(buffer)
            if not count:
                return
            yield view[:count]


def advise(fd: int, advice: str) -> None:
    if hasattr(os, "posix_fadvise") and hasattr(os, advice):
        os.posix_fadvise(fd, 0, 0, getattr(os, advice))


def drop_page_cache(fd: int) -> None:
    advise(fd, "POSIX_FADV_DONTNEED")


def temp_name(base: str) -> str:
    suffix = f".staging-{secrets.token_hex(4)}"
    room = NAME_MAX - len(suffix.encode()) - 1
    encoded = base.encode("utf-8", "surrogateescape")
    if len(encoded) > room:
        base = encoded[:room].decode("utf-8", "ignore")
    return f".{base}{suffix}"


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    directory, base = os.path.split(path)
    temp = os.path.join(directory, temp_name(base))
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o644)
    try:
        with open(fd, "wb", closefd=False) as writer:
            writer.write(data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temp, path)
        temp = None
        fsync_directory(directory)
    finally:
        if fd >= 0:
            os.close(fd)
        if temp is not None:
            remove_quietly(temp)


def remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def run_parallel(function, items, workers: int):
    """Yield (item, function(item)) as they finish with at most 2 * workers in flight; after an
    exception nothing more starts and it is raised once the ones in flight are done."""
    pending_items = iter(items)
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict = {}
        while True:
            while error is None and len(running) < 2 * workers:
                item = next(pending_items, NOTHING_LEFT)
                if item is NOTHING_LEFT:
                    break
                running[pool.submit(function, item)] = item
            if not running:
                break
            done, dummy = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                item = running.pop(future)
                try:
                    result = future.result()
                except BaseException as failure:
                    error = error or failure
                    continue
                yield item, result
    if error is not None:
        raise error
