#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Stage a dataset onto a node's local file system so that no file under its final name is ever
partial or unverified, and keep a record of what is there."""

from __future__ import annotations

DOCUMENTATION = r"""
module: dataset_stage
short_description: Copy a dataset onto local storage, verified, resumable, never half-written
description:
  - C(copy) stages every file of I(source) (or exactly the files of I(manifest)) into I(dest).
    Each file is written to a temporary C(.<name>.staging-<8 chars>) next to its final name,
    hashed while it is written (and, with I(verify_written), again from disk), fsync'ed and
    only then renamed; a killed run leaves temporaries, which the next run removes.
  - Destination files already in place are trusted when their size and mtime match the record
    of the last run (I(verify=changed)) or hashed (I(verify=all)); a mismatch is recopied.
    Files at I(dest) that are not part of the dataset are counted, never removed.
  - Nothing is copied unless the file system of I(dest) has room for all of it.
  - C(plan) (the dataset is on the controller) writes the files still needed to I(files_from)
    for C(rsync --files-from); C(commit) verifies what rsync pushed into I(incoming) and moves
    it into place; C(measure) only counts files and bytes; C(manifest) (run on the controller)
    checksums a source into I(manifest) and I(sizes), reading again only files whose size or
    mtime changed since the last run (cache in I(state_dir)); C(sizes) writes I(sizes) for
    the files of a given I(manifest).
  - Records are kept in I(state_dir) as C(<name>.json) and C(<name>.sha256); the latter exists
    only while I(dest) matches it completely (C(cd dest && sha256sum -c ...) passes).
options:
  name:
    description: Dataset name, used in messages and in the names of the state files.
    type: str
    required: true
  mode:
    description: What to do.
    type: str
    choices: [copy, plan, commit, measure, manifest, sizes]
    default: copy
  source:
    description: Directory on the node holding the dataset. Required for copy and measure.
    type: path
  dest:
    description: Destination directory. Required except for measure.
    type: path
  manifest:
    description:
      - Checksums in C(sha256sum) output format (with the I(checksum) algorithm), relative
        paths. When given, exactly its files are staged and each must match.
      - Required for plan and commit.
    type: path
  state_dir:
    description: Where the records are kept. Required except for measure.
    type: path
  checksum:
    description: A hashlib algorithm from hashlib.algorithms_guaranteed (not shake).
    type: str
    default: sha256
  parallel:
    description: Number of files copied or hashed at once.
    type: int
    default: 4
  verify:
    description: C(changed) trusts destination files matching the last run's record, C(all)
      hashes every destination file.
    type: str
    choices: [changed, all]
    default: changed
  verify_written:
    description: Drop each written file from the page cache and hash it again before renaming.
    type: bool
    default: true
  incoming:
    description: For commit, the directory (on the file system of I(dest)) rsync pushed into.
    type: path
  files_from:
    description: For plan, where the relative paths still needed are written, one per line.
    type: path
  sizes:
    description:
      - For plan when I(source) is not on the node, C(<bytes>  <relative/path>) lines (as from
        C(find . -type f -printf '%s  %P\n')) giving the sizes for the free-space check.
    type: path
  dry_run:
    description:
      - For copy, plan and commit, change nothing and say what I(mode) would do, as in check
        mode (copy and commit return I(would_copy_files) and I(would_copy_bytes)). Refused for
        manifest and sizes, which write their files in check mode too.
      - The dataset_staging role's verify action asks a copy this way whether a staged dataset
        is complete, whether or not the run is in check mode.
    type: bool
    default: false
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Copy a dataset to local NVMe, resuming where an earlier copy stopped
  hostcheck.gpu_hosts.dataset_stage:
    mode: copy
    name: imagenet
    source: /mnt/nfs/imagenet
    dest: /data/imagenet
    state_dir: /data/.staging
"""

RETURN = r"""
files_total:
  description: Files in the dataset.
  type: int
  returned: always
bytes_total:
  description: Bytes in the dataset.
  type: int
  returned: always
files_copied:
  description: Files written (copy) or moved into place (commit).
  type: int
  returned: copy, commit
bytes_copied:
  description: Their bytes.
  type: int
  returned: copy, commit
files_skipped:
  description: Files already in place and intact.
  type: int
  returned: copy, plan, commit
files_verified:
  description: Files hashed at the destination (or in incoming), plus read-backs of written files.
  type: int
  returned: copy, plan, commit
recopied_corrupt:
  description: Destination files that did not match and were (or are to be) replaced, first 50.
  type: list
  returned: copy, plan, commit
changed_at_source:
  description: Files whose wanted content changed since they were staged.
  type: int
  returned: copy, plan, commit
temps_removed:
  description: Temporaries of killed runs removed (and, for commit, leftovers in incoming).
  type: int
  returned: copy, plan, commit
extra_files:
  description: Files at the destination that are not part of the dataset (left alone).
  type: int
  returned: copy, plan, commit
to_copy:
  description: For plan, the relative paths still needed (first 1000).
  type: list
  returned: plan
would_copy_files:
  description: Files copy would write or commit would move into place.
  type: int
  returned: copy and commit with dry_run or in check mode
would_copy_bytes:
  description: Their bytes.
  type: int
  returned: copy and commit with dry_run or in check mode
summary:
  description: One line for humans.
  type: str
  returned: always
"""

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import NamedTuple

from ansible.module_utils.basic import AnsibleModule

BUFFER_BYTES = 1 << 20
MIB = float(1 << 20)
STAGING_TEMP = re.compile(r"\A\..+\.staging-[0-9a-z]{8}\Z", re.DOTALL)
NAME_MAX = 255
NOTHING_LEFT = object()
STATE_FORMAT = 1
RECOPIED_SHOWN = 50
TO_COPY_SHOWN = 1000
MODES = ("copy", "plan", "commit", "measure", "manifest", "sizes")
VERIFY = ("changed", "all")
PATH_OPTIONS = ("source", "dest", "manifest", "state_dir", "incoming", "files_from", "sizes")
DEFAULTS = {
    "mode": "copy",
    "source": None,
    "dest": None,
    "manifest": None,
    "state_dir": None,
    "checksum": "sha256",
    "parallel": 4,
    "verify": "changed",
    "verify_written": True,
    "incoming": None,
    "files_from": None,
    "sizes": None,
    "dry_run": False,
}
REQUIRED = {
    "copy": ("source", "dest", "state_dir"),
    "plan": ("manifest", "dest", "state_dir", "files_from"),
    "commit": ("manifest", "incoming", "dest", "state_dir"),
    "measure": ("source",),
    "manifest": ("source", "manifest", "sizes", "state_dir"),
    "sizes": ("source", "manifest", "sizes"),
}


class StagingError(Exception):
    """A failure to report in one line; `result` holds what was done before it."""

    def __init__(self, message: str, result: dict | None = None) -> None:
        super().__init__(message)
        self.result = result or {}


class Wanted(NamedTuple):
    rel: str
    size: int | None
    mtime_ns: int | None
    checksum: str | None


class Record(NamedTuple):
    size: int
    source_mtime_ns: int | None
    checksum: str
    dest_mtime_ns: int


class Decision(NamedTuple):
    copy: bool
    reason: str = ""
    record: Record | None = None
    hashed_bytes: int = 0


def human(count: float) -> str:
    if count < 1024:
        return f"{int(count)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        count /= 1024
        if count < 1024 or unit == "TiB":
            break
    return f"{count:.1f} {unit}"


def rate(count: int, seconds: float) -> float:
    return round(count / MIB / seconds, 1) if count and seconds > 0 else 0.0


def check_algorithm(name: str) -> str:
    if name not in hashlib.algorithms_guaranteed or name.startswith("shake_"):
        choices = sorted(a for a in hashlib.algorithms_guaranteed if not a.startswith("shake_"))
        raise StagingError(f"checksum: unknown algorithm {name!r}, use one of {', '.join(choices)}")
    return name


def clean_relative(path: str, where: str) -> str:
    """`path` as a/b/c; absolute paths and .. components are refused, naming `where`."""
    if path.startswith("/"):
        raise StagingError(f"{where}: absolute path {path!r}, only relative paths are allowed")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise StagingError(f"{where}: path {path!r} has a '..' component")
    if not parts:
        raise StagingError(f"{where}: empty path")
    if STAGING_TEMP.match(parts[-1]):
        raise StagingError(f"{where}: {path!r} is named like a staging temporary")
    return "/".join(parts)


def read_lines(path: str, what: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise StagingError(f"{what} {path}: cannot be read: {error.strerror}") from error
    return data.decode("utf-8", "surrogateescape").split("\n")


def unescape(name: str) -> str:
    """Undo sha256sum's escaping of a name that contains a backslash or a newline."""
    out, chars = [], iter(name)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append("\n" if following == "n" else following)
        else:
            out.append(char)
    return "".join(out)


def escape(name: str) -> tuple[str, str]:
    """The sha256sum line prefix and name for `name`."""
    if "\\" in name or "\n" in name:
        return "\\", name.replace("\\", "\\\\").replace("\n", "\\n")
    return "", name


def parse_manifest(path: str, algorithm: str) -> dict[str, str]:
    """Relative path -> lowercase hex checksum, in file order."""
    digits = hashlib.new(algorithm).digest_size * 2
    entries: dict[str, str] = {}
    line_pattern = re.compile(r"\A(\\?)([0-9a-fA-F]+) [ *](.+)\Z", re.DOTALL)
    for number, raw in enumerate(read_lines(path, "manifest"), start=1):
        line = raw.rstrip("\r").lstrip(" \t")
        if not line.strip() or line.startswith("#"):
            continue
        where = f"manifest {path} line {number}"
        match = line_pattern.match(line)
        if not match:
            raise StagingError(f"{where}: expected '<{algorithm} hex>  <relative/path>'")
        escaped, checksum, name = match.groups()
        if len(checksum) != digits:
            raise StagingError(
                f"{where}: checksum has {len(checksum)} hex digits, {algorithm} has {digits}"
            )
        rel = clean_relative(unescape(name) if escaped else name, where)
        if rel in entries:
            raise StagingError(f"{where}: {rel!r} is listed twice")
        entries[rel] = checksum.lower()
    return entries


def parse_sizes(path: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for number, raw in enumerate(read_lines(path, "sizes"), start=1):
        line = raw.rstrip("\r").strip(" \t")
        if not line or line.startswith("#"):
            continue
        size, dummy, name = line.partition(" ")
        if not size.isdigit() or not name.strip():
            raise StagingError(f"sizes {path} line {number}: expected '<bytes>  <relative/path>'")
        sizes[clean_relative(name.lstrip(" "), f"sizes {path} line {number}")] = int(size)
    return sizes


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


def source_files(source: str) -> tuple[list[Wanted], int]:
    """Every regular file under `source` with its size and mtime, and the count of the rest."""
    wanted, ignored = [], 0
    for rel, entry in walk(source):
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISREG(info.st_mode) and not STAGING_TEMP.match(entry.name):
            wanted.append(Wanted(rel, info.st_size, info.st_mtime_ns, None))
        else:
            ignored += 1
    wanted.sort(key=lambda item: item.rel)
    return wanted, ignored


def manifest_files(
    manifest: dict[str, str], source: str | None, sizes: dict[str, int] | None = None
) -> list[Wanted]:
    wanted = []
    for rel, checksum in manifest.items():
        size = mtime_ns = None
        if source is not None:
            path = os.path.join(source, rel)
            try:
                info = os.stat(path)
            except OSError as error:
                raise StagingError(
                    f"manifest entry {rel}: source file {path} {error.strerror.lower()}"
                ) from error
            if not stat.S_ISREG(info.st_mode):
                raise StagingError(f"manifest entry {rel}: source {path} is not a regular file")
            size, mtime_ns = info.st_size, info.st_mtime_ns
        elif sizes is not None:
            size = sizes.get(rel)
            if size is None:
                raise StagingError(f"manifest entry {rel}: no size for it in the sizes file")
        wanted.append(Wanted(rel, size, mtime_ns, checksum))
    wanted.sort(key=lambda item: item.rel)
    return wanted


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


def mount_point(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def existing_ancestor(path: str) -> str:
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def free_bytes(path: str) -> int:
    info = os.statvfs(existing_ancestor(path))
    return info.f_bavail * info.f_frsize


def check_free_space(name: str, dest: str, needed: int) -> tuple[str, int]:
    mount, free = mount_point(dest), free_bytes(dest)
    if needed > free:
        raise StagingError(
            f"dataset_staging_datasets[{name}]: needs {needed} bytes ({human(needed)}) on "
            f"{mount}, only {free} bytes ({human(free)}) free"
        )
    return mount, free


def scan_dest(dest: str, skip: str | None, remove_temps: bool) -> tuple[dict, int]:
    """The files under `dest` (relative path -> lstat) and the count of staging temporaries,
    which are removed when `remove_temps`."""
    found: dict[str, os.stat_result] = {}
    temps = 0
    if not os.path.isdir(dest):
        return found, temps
    for rel, entry in walk(dest, skip):
        if STAGING_TEMP.match(entry.name) and entry.is_file(follow_symlinks=False):
            temps += 1
            if remove_temps:
                remove_quietly(entry.path)
            continue
        found[rel] = entry.stat(follow_symlinks=False)
    return found, temps


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


class Stager:
    """One run of the module against one dataset."""

    def __init__(self, options: dict, check_mode: bool) -> None:
        self.options = options
        self.check_mode = check_mode
        self.name = options["name"]
        self.mode = options["mode"]
        self.algorithm = options["checksum"]
        self.dest = os.path.normpath(options["dest"]) if options["dest"] else None
        self.state_dir = os.path.normpath(options["state_dir"]) if options["state_dir"] else None
        self.workers = options["parallel"]
        self.warnings: list[str] = []
        self.counts = {
            "files_copied": 0,
            "bytes_copied": 0,
            "files_skipped": 0,
            "bytes_skipped": 0,
            "files_verified": 0,
            "bytes_verified": 0,
            "changed_at_source": 0,
            "temps_removed": 0,
            "extra_files": 0,
            "ignored": 0,
        }
        self.recopied: list[str] = []
        self.records: dict[str, Record] = {}
        self.copy_seconds = 0.0
        self.verify_seconds = 0.0
        self.verify_hashed_bytes = 0
        self.pushed: list[Wanted] = []

    # records

    def state_path(self, suffix: str) -> str:
        return os.path.join(self.state_dir, f"{self.name}{suffix}")

    def load_records(self) -> dict[str, Record]:
        path = self.state_path(".json")
        try:
            with open(path) as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            self.warnings.append(f"{path} unreadable ({error}); every destination file is hashed")
            return {}
        if state.get("checksum") != self.algorithm or state.get("dest") != self.dest:
            return {}
        try:
            return {rel: Record(**fields) for rel, fields in state.get("files", {}).items()}
        except TypeError:
            self.warnings.append(f"{path} has unknown fields; every destination file is hashed")
            return {}

    def save_records(self, complete: bool) -> None:
        state = {
            "format": STATE_FORMAT,
            "name": self.name,
            "dest": self.dest,
            "checksum": self.algorithm,
            "complete": complete,
            "files": {rel: self.records[rel]._asdict() for rel in sorted(self.records)},
        }
        os.makedirs(self.state_dir, exist_ok=True)
        atomic_write(self.state_path(".json"), json.dumps(state, indent=1).encode())
        if complete:
            lines = []
            for rel in sorted(self.records):
                prefix, name = escape(rel)
                lines.append(f"{prefix}{self.records[rel].checksum}  {name}\n")
            data = "".join(lines).encode("utf-8", "surrogateescape")
            atomic_write(self.state_path(".sha256"), data)

    def withdraw_checksums(self) -> None:
        """The .sha256 vouches for a complete destination: it goes before anything changes."""
        path = self.state_path(".sha256")
        if os.path.exists(path):
            os.unlink(path)
            fsync_directory(self.state_dir)

    def lock(self) -> int | None:
        if self.check_mode:
            return None
        os.makedirs(self.state_dir, exist_ok=True)
        path = self.state_path(".lock")
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StagingError(
                    f"{self.name}: another dataset_stage run holds {path}; try again later"
                ) from error
            raise
        return fd

    # deciding

    def decide(self, item: Wanted, found: os.stat_result | None) -> Decision | Wanted:
        """What to do with one wanted file without reading it, or `item` with its expected
        checksum (None: hash the source too) when the destination file must be hashed."""
        if found is None:
            return Decision(copy=True, reason="new")
        if not stat.S_ISREG(found.st_mode):
            raise StagingError(
                f"{os.path.join(self.dest, item.rel)} exists and is not a regular file"
            )
        record = self.records.get(item.rel)
        changed = False
        if item.checksum is not None:
            expected = item.checksum
            changed = record is not None and record.checksum != expected
        elif record is None:
            expected = None
        elif (record.size, record.source_mtime_ns) == (item.size, item.mtime_ns):
            expected = record.checksum
        else:
            return Decision(copy=True, reason="changed")
        reason = "changed" if changed else "corrupt"
        if item.size is not None and found.st_size != item.size:
            return Decision(copy=True, reason=reason)
        if (
            self.options["verify"] == "changed"
            and record is not None
            and record.checksum == expected
            and (record.size, record.dest_mtime_ns) == (found.st_size, found.st_mtime_ns)
        ):
            return Decision(copy=False, record=record)
        return Wanted(item.rel, item.size, item.mtime_ns, expected)

    def verify_dest(self, item: Wanted) -> Decision:
        """Hash the destination file (and the source, when nothing else says what it holds)."""
        dest_path = os.path.join(self.dest, item.rel)
        expected = item.checksum
        if expected is None:
            expected = hash_file(os.path.join(self.options["source"], item.rel), self.algorithm)
        found = os.stat(dest_path)
        actual = hash_file(dest_path, self.algorithm)
        if actual != expected:
            record = self.records.get(item.rel)
            changed = record is not None and record.checksum != expected
            reason = "changed" if changed else "corrupt"
            return Decision(copy=True, reason=reason, hashed_bytes=found.st_size)
        record = Record(found.st_size, item.mtime_ns, actual, found.st_mtime_ns)
        return Decision(copy=False, record=record, hashed_bytes=found.st_size)

    def triage(self, wanted: list[Wanted], found: dict) -> list[Wanted]:
        """Skip what is in place (updating self.records), return what has to be copied."""
        to_copy: list[Wanted] = []
        to_hash: list[Wanted] = []
        kept: dict[str, Record] = {}
        by_rel = {item.rel: item for item in wanted}

        def settle(item: Wanted, decision: Decision) -> None:
            if decision.copy:
                to_copy.append(item)
                if decision.reason == "corrupt":
                    self.recopied.append(item.rel)
                elif decision.reason == "changed":
                    self.counts["changed_at_source"] += 1
            else:
                kept[item.rel] = decision.record
                self.counts["files_skipped"] += 1
                self.counts["bytes_skipped"] += decision.record.size

        for item in wanted:
            outcome = self.decide(item, found.get(item.rel))
            if isinstance(outcome, Decision):
                settle(item, outcome)
            else:
                to_hash.append(outcome)
        started = time.perf_counter()
        for hashed, decision in run_parallel(self.verify_dest, to_hash, self.workers):
            self.counts["files_verified"] += 1
            self.counts["bytes_verified"] += decision.hashed_bytes
            self.verify_hashed_bytes += decision.hashed_bytes
            settle(by_rel[hashed.rel], decision)
        self.verify_seconds = time.perf_counter() - started if to_hash else 0.0
        self.counts["extra_files"] = len(set(found) - set(by_rel))
        self.records = kept
        to_copy.sort(key=lambda item: item.rel)
        return to_copy

    # copying

    def copy_one(self, item: Wanted) -> tuple[Record, bool]:
        source_path = os.path.join(self.options["source"], item.rel)
        for _attempt in range(2):
            outcome = self.write_verified(item, source_path)
            if outcome is not None:
                return outcome
        raise StagingError(
            f"{source_path} changed while it was being copied (twice); stage it when nothing "
            "writes to it"
        )

    def write_verified(self, item: Wanted, source_path: str) -> tuple[Record, bool] | None:
        """Copy one file under a temporary name and rename it into place once verified; None
        when the source changed while it was read (nothing is left behind then)."""
        dest_path = os.path.join(self.dest, item.rel)
        directory, base = os.path.split(dest_path)
        verify_written = self.options["verify_written"]
        temp: str | None = os.path.join(directory, temp_name(base))
        write_fd = read_fd = source_fd = -1
        try:
            write_fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            if verify_written:
                read_fd = os.open(temp, os.O_RDONLY | os.O_CLOEXEC)
            source_fd = os.open(source_path, os.O_RDONLY | os.O_CLOEXEC)
            before = os.fstat(source_fd)
            digest = hashlib.new(self.algorithm)
            copied = 0
            for chunk in chunks(source_fd):
                digest.update(chunk)
                written = 0
                while written < len(chunk):
                    written += os.write(write_fd, chunk[written:])
                copied += len(chunk)
            after = os.stat(source_path)
            moved = (before.st_size, before.st_mtime_ns, before.st_ino) != (
                after.st_size,
                after.st_mtime_ns,
                after.st_ino,
            )
            if moved or copied != before.st_size:
                return None
            checksum = digest.hexdigest()
            if item.checksum is not None and checksum != item.checksum:
                raise StagingError(
                    f"{source_path}: {self.algorithm} of the source is {checksum}, the manifest "
                    f"says {item.checksum}; nothing was staged under {dest_path}"
                )
            os.fchmod(write_fd, stat.S_IMODE(before.st_mode))
            times = (before.st_atime_ns, before.st_mtime_ns)
            if os.utime in os.supports_fd:
                os.utime(write_fd, ns=times)
            else:
                os.utime(temp, ns=times)
            os.fsync(write_fd)
            if verify_written:
                drop_page_cache(read_fd)
                again = hash_descriptor(read_fd, self.algorithm)
                if again != checksum:
                    raise StagingError(
                        f"{dest_path}: the written copy reads back as {self.algorithm} {again}, "
                        f"the source was {checksum}; not renamed into place"
                    )
            os.replace(temp, dest_path)
            temp = None
            placed = os.stat(dest_path)
            record = Record(copied, before.st_mtime_ns, checksum, placed.st_mtime_ns)
            return record, verify_written
        finally:
            for fd in (write_fd, read_fd, source_fd):
                if fd >= 0:
                    os.close(fd)
            if temp is not None:
                remove_quietly(temp)

    def make_directories(self, items: list[Wanted]) -> set[str]:
        """Create the destination directories; return every directory whose entries change."""
        touched = set()
        if items and not os.path.isdir(self.dest):
            touched.add(os.path.dirname(self.dest))
        for rel_dir in sorted({os.path.dirname(item.rel) for item in items}):
            directory = os.path.join(self.dest, rel_dir) if rel_dir else self.dest
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as error:
                raise StagingError(
                    f"{directory}: cannot create the directory: {error.strerror}"
                ) from error
            while directory != os.path.dirname(self.dest):
                touched.add(directory)
                directory = os.path.dirname(directory)
        return touched

    def copy_all(self, to_copy: list[Wanted]) -> None:
        touched = self.make_directories(to_copy)
        started = time.perf_counter()
        largest_first = sorted(to_copy, key=lambda item: -(item.size or 0))
        try:
            for item, (record, read_back) in run_parallel(
                self.copy_one, largest_first, self.workers
            ):
                self.records[item.rel] = record
                self.counts["files_copied"] += 1
                self.counts["bytes_copied"] += record.size
                if read_back:
                    self.counts["files_verified"] += 1
                    self.counts["bytes_verified"] += record.size
        except OSError as error:
            raise StagingError(f"{self.name}: copy failed: {error}") from error
        finally:
            self.copy_seconds = time.perf_counter() - started
            for directory in sorted(touched, key=len, reverse=True):
                fsync_directory(directory)

    # committing what rsync pushed

    def commit_one(self, item: Wanted) -> tuple[str, os.stat_result, bool]:
        path = os.path.join(self.options["incoming"], item.rel)
        info = os.stat(path)
        actual = hash_file(path, self.algorithm)
        return actual, info, actual == item.checksum

    def commit(self, wanted: list[Wanted], found: dict) -> list[str]:
        """Move verified pushed files into place; return the problems."""
        incoming = self.options["incoming"]
        pushed, absent = [], []
        for item in wanted:
            path = os.path.join(incoming, item.rel)
            if os.path.isfile(path) and not os.path.islink(path):
                pushed.append(item)
            else:
                absent.append(item)
        previous = self.records
        problems = [
            f"{item.rel} is neither in {incoming} nor intact at {self.dest}"
            for item in self.triage(absent, found)
        ]
        self.recopied, self.counts["changed_at_source"] = [], 0
        self.counts["extra_files"] = len(set(found) - {item.rel for item in wanted})
        if self.check_mode:
            self.pushed = pushed
            return problems
        if pushed:
            self.withdraw_checksums()
        touched = self.make_directories(pushed)
        started = time.perf_counter()
        try:
            for item, (actual, info, matches) in run_parallel(
                self.commit_one, pushed, self.workers
            ):
                source_path = os.path.join(incoming, item.rel)
                self.counts["files_verified"] += 1
                self.counts["bytes_verified"] += info.st_size
                if not matches:
                    os.unlink(source_path)
                    problems.append(
                        f"{item.rel} arrived as {self.algorithm} {actual}, the manifest says "
                        f"{item.checksum} (removed from {incoming})"
                    )
                    continue
                record = previous.get(item.rel)
                if record is not None and record.checksum != item.checksum:
                    self.counts["changed_at_source"] += 1
                elif item.rel in found:
                    self.recopied.append(item.rel)
                os.replace(source_path, os.path.join(self.dest, item.rel))
                self.records[item.rel] = Record(
                    info.st_size, info.st_mtime_ns, actual, info.st_mtime_ns
                )
                self.counts["files_copied"] += 1
                self.counts["bytes_copied"] += info.st_size
        finally:
            self.copy_seconds = time.perf_counter() - started
            for directory in sorted(touched, key=len, reverse=True):
                fsync_directory(directory)
        self.counts["temps_removed"] += self.clear_incoming()
        return problems

    def clear_incoming(self) -> int:
        """Remove what is left in incoming (partial pushes); return how many files that was."""
        incoming = self.options["incoming"]
        removed = 0
        for directory, subdirectories, files in os.walk(incoming, topdown=False):
            for name in files:
                remove_quietly(os.path.join(directory, name))
                removed += 1
            for name in subdirectories:
                path = os.path.join(directory, name)
                if os.path.islink(path):
                    os.unlink(path)
                    removed += 1
                else:
                    try:
                        os.rmdir(path)
                    except OSError as error:
                        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                            raise
        if removed:
            fsync_directory(incoming)
        return removed

    # the run

    def result(self, started: float, **extra) -> dict:
        counts = self.counts
        result = {
            **counts,
            "recopied_corrupt": self.recopied[:RECOPIED_SHOWN],
            "recopied_corrupt_count": len(self.recopied),
            "seconds": round(time.perf_counter() - started, 3),
            "copy_mib_per_s": rate(counts["bytes_copied"], self.copy_seconds),
            "verify_mib_per_s": rate(self.verify_hashed_bytes, self.verify_seconds),
            "warnings": self.warnings,
            **extra,
        }
        verb = "committed" if self.mode == "commit" else "copied"
        result["summary"] = (
            f"{self.name}: {counts['files_copied']} files {human(counts['bytes_copied'])} "
            f"{verb}, {counts['files_skipped']} skipped, {counts['files_verified']} verified, "
            f"{len(self.recopied)} recopied, {result['copy_mib_per_s']:.1f} MiB/s"
        )
        return result

    def wanted(self) -> list[Wanted]:
        options = self.options
        if options["manifest"]:
            manifest = parse_manifest(options["manifest"], self.algorithm)
            if self.mode in ("plan", "commit") and not options["source"]:
                sizes = parse_sizes(options["sizes"]) if options["sizes"] else None
                return manifest_files(manifest, None, sizes)
            return manifest_files(manifest, options["source"])
        wanted, self.counts["ignored"] = source_files(options["source"])
        return wanted

    def run(self) -> dict:
        started = time.perf_counter()
        lock = self.lock()
        try:
            return self.run_locked(started)
        finally:
            if lock is not None:
                os.close(lock)

    def run_locked(self, started: float) -> dict:
        remove = not self.check_mode
        found, temps = scan_dest(self.dest, self.state_dir, remove_temps=remove)
        self.counts["temps_removed" if remove else "would_remove_temps"] = temps
        self.records = self.load_records()
        wanted = self.wanted()
        totals = {"files_total": len(wanted), "bytes_total": sum(i.size or 0 for i in wanted)}
        if self.mode == "commit":
            return self.run_commit(started, wanted, found, totals)
        to_copy = self.triage(wanted, found)
        needed = sum(item.size or 0 for item in to_copy)
        mount, free = check_free_space(self.name, self.dest, needed)
        totals.update(mount=mount, bytes_free=free)
        if self.mode == "plan":
            return self.run_plan(started, to_copy, needed, totals, temps)
        if self.check_mode:
            result = self.result(
                started,
                changed=bool(to_copy or temps),
                would_copy_files=len(to_copy),
                would_copy_bytes=needed,
                **totals,
            )
            result["summary"] = (
                f"{self.name}: would copy {len(to_copy)} files {human(needed)}, "
                f"{self.counts['files_skipped']} in place, remove {temps} temporaries"
            )
            return result
        if to_copy:
            self.withdraw_checksums()
        try:
            self.copy_all(to_copy)
        except StagingError as error:
            self.save_records(complete=False)
            raise StagingError(str(error), self.result(started, changed=True, **totals)) from None
        self.save_records(complete=True)
        changed = self.counts["files_copied"] > 0 or temps > 0
        return self.result(started, changed=changed, **totals)

    def run_plan(
        self, started: float, to_copy: list[Wanted], needed: int, totals: dict, temps: int
    ) -> dict:
        paths = [item.rel for item in to_copy]
        newline = next((rel for rel in paths if "\n" in rel), None)
        if newline is not None:
            raise StagingError(
                f"{newline!r}: a path with a newline cannot go to rsync --files-from"
            )
        if not self.check_mode:
            data = "".join(f"{rel}\n" for rel in paths).encode("utf-8", "surrogateescape")
            atomic_write(self.options["files_from"], data)
            self.save_records(complete=not paths)
        result = self.result(
            started,
            changed=bool(paths or temps),
            to_copy=paths[:TO_COPY_SHOWN],
            to_copy_count=len(paths),
            bytes_to_copy=needed,
            files_from=self.options["files_from"],
            **totals,
        )
        result["summary"] = (
            f"{self.name}: {len(paths)} files {human(needed)} to push, "
            f"{self.counts['files_skipped']} in place, {self.counts['files_verified']} verified, "
            f"{len(self.recopied)} to replace"
        )
        return result

    def run_commit(self, started: float, wanted: list[Wanted], found: dict, totals: dict) -> dict:
        incoming = self.options["incoming"]
        if not os.path.isdir(incoming):
            raise StagingError(f"incoming: {incoming} is not a directory")
        if os.stat(incoming).st_dev != os.stat(existing_ancestor(self.dest)).st_dev:
            raise StagingError(
                f"incoming: {incoming} is not on the file system of {self.dest} (moves would copy)"
            )
        problems = self.commit(wanted, found)
        if self.check_mode:
            would = len(self.pushed)
            return self.result(
                started,
                changed=bool(would or self.counts.get("would_remove_temps")),
                would_copy_files=would,
                would_copy_bytes=sum(
                    os.path.getsize(os.path.join(incoming, i.rel)) for i in self.pushed
                ),
                **totals,
            )
        totals["bytes_total"] = sum(record.size for record in self.records.values())
        changed = self.counts["files_copied"] > 0 or self.counts["temps_removed"] > 0
        if problems:
            self.save_records(complete=False)
            shown = "; ".join(problems[:10])
            more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
            raise StagingError(
                f"{self.name}: {len(problems)} files not committed: {shown}{more}",
                self.result(started, changed=changed, **totals),
            )
        self.save_records(complete=True)
        return self.result(started, changed=changed, **totals)


def measure(options: dict) -> dict:
    if options["manifest"]:
        manifest = parse_manifest(options["manifest"], options["checksum"])
        wanted, ignored = manifest_files(manifest, options["source"]), 0
    else:
        wanted, ignored = source_files(options["source"])
    files, size = len(wanted), sum(item.size for item in wanted)
    return {
        "changed": False,
        "files_total": files,
        "bytes_total": size,
        "ignored": ignored,
        "summary": f"{options['name']}: {files} files, {human(size)}",
    }


def make_manifest(options: dict) -> dict:
    """Checksum every file of a source (the controller's, for a push) into a manifest and a
    sizes file; files whose size and mtime match the last run's cache are not read again."""
    source, algorithm, name = options["source"], options["checksum"], options["name"]
    wanted, ignored = source_files(source)
    cache_path = os.path.join(options["state_dir"], f"{name}.source.json")
    try:
        with open(cache_path) as handle:
            cached = json.load(handle)
        known = cached["files"] if cached.get("checksum") == algorithm else {}
    except (OSError, ValueError, KeyError, TypeError):
        known = {}
    sums = {
        item.rel: known[item.rel][2]
        for item in wanted
        if known.get(item.rel, [None, None])[:2] == [item.size, item.mtime_ns]
    }

    def checksum_of(item: Wanted) -> str:
        path = os.path.join(source, item.rel)
        checksum = hash_file(path, algorithm)
        after = os.stat(path)
        if (after.st_size, after.st_mtime_ns) != (item.size, item.mtime_ns):
            raise StagingError(f"{name}: {path} changed while it was checksummed; run again")
        return checksum

    started = time.monotonic()
    to_hash = [item for item in wanted if item.rel not in sums]
    for item, checksum in run_parallel(checksum_of, to_hash, options["parallel"]):
        sums[item.rel] = checksum
    lines, sizes = [], []
    for item in wanted:
        prefix, escaped = escape(item.rel)
        lines.append(f"{prefix}{sums[item.rel]}  {escaped}\n")
        sizes.append(f"{item.size}  {item.rel}\n")
    text = "".join(lines).encode()
    try:
        with open(options["manifest"], "rb") as handle:
            changed = handle.read() != text
    except OSError:
        changed = True
    os.makedirs(options["state_dir"], exist_ok=True)
    atomic_write(options["manifest"], text)
    atomic_write(options["sizes"], "".join(sizes).encode())
    files = {item.rel: [item.size, item.mtime_ns, sums[item.rel]] for item in wanted}
    atomic_write(cache_path, json.dumps({"checksum": algorithm, "files": files}).encode())
    seconds = time.monotonic() - started
    hashed_bytes = sum(item.size for item in to_hash)
    return {
        "changed": changed,
        "files_total": len(wanted),
        "bytes_total": sum(item.size for item in wanted),
        "files_hashed": len(to_hash),
        "bytes_hashed": hashed_bytes,
        "ignored": ignored,
        "hash_mib_per_s": rate(hashed_bytes, seconds),
        "summary": f"{name}: {len(wanted)} files checksummed, {len(to_hash)} read again",
    }


def write_sizes(options: dict) -> dict:
    """The sizes file for a given manifest, from the source files it lists."""
    manifest = parse_manifest(options["manifest"], options["checksum"])
    wanted = manifest_files(manifest, options["source"])
    atomic_write(options["sizes"], "".join(f"{w.size}  {w.rel}\n" for w in wanted).encode())
    size = sum(item.size for item in wanted)
    return {
        "changed": False,
        "files_total": len(wanted),
        "bytes_total": size,
        "summary": f"{options['name']}: {len(wanted)} files, {human(size)}",
    }


def validate(options: dict) -> dict:
    options = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    name = options.get("name") or ""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise StagingError(f"name: {name!r} is not usable as a dataset (and file) name")
    if options["mode"] not in MODES:
        raise StagingError(f"mode: {options['mode']!r} is not one of {', '.join(MODES)}")
    if options["dry_run"] and options["mode"] in ("manifest", "sizes"):
        raise StagingError(f"dry_run: mode {options['mode']} cannot run without writing")
    if options["verify"] not in VERIFY:
        raise StagingError(f"verify: {options['verify']!r} is not one of {', '.join(VERIFY)}")
    check_algorithm(options["checksum"])
    if not isinstance(options["parallel"], int) or options["parallel"] < 1:
        raise StagingError(f"parallel: must be 1 or more, got {options['parallel']!r}")
    for key in PATH_OPTIONS:
        value = options[key]
        if value is not None and not os.path.isabs(value):
            raise StagingError(f"{key}: must be an absolute path, got {value!r}")
    missing = [key for key in REQUIRED[options["mode"]] if not options[key]]
    if missing:
        raise StagingError(f"mode {options['mode']} needs {' and '.join(missing)}")
    source = options["source"]
    if source is not None:
        if not os.path.exists(source):
            raise StagingError(f"source: {source} does not exist")
        if not os.path.isdir(source):
            raise StagingError(f"source: {source} is not a directory")
    if options["mode"] == "plan" and not (options["sizes"] or source):
        raise StagingError(
            "mode plan needs sizes (or a source on the node) for the free-space check"
        )
    return options


def stage(options: dict, check_mode: bool = False) -> dict:
    """Run the module's work, changing nothing when check_mode or dry_run; raise StagingError
    with a one-line message on failure."""
    options = validate(options)
    try:
        if options["mode"] == "measure":
            return measure(options)
        if options["mode"] == "manifest":
            return make_manifest(options)
        if options["mode"] == "sizes":
            return write_sizes(options)
        return Stager(options, check_mode or options["dry_run"]).run()
    except OSError as error:
        raise StagingError(f"{options['name']}: {error}") from error


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "mode": {"type": "str", "choices": list(MODES), "default": "copy"},
            "source": {"type": "path"},
            "dest": {"type": "path"},
            "manifest": {"type": "path"},
            "state_dir": {"type": "path"},
            "checksum": {"type": "str", "default": "sha256"},
            "parallel": {"type": "int", "default": 4},
            "verify": {"type": "str", "choices": list(VERIFY), "default": "changed"},
            "verify_written": {"type": "bool", "default": True},
            "incoming": {"type": "path"},
            "files_from": {"type": "path"},
            "sizes": {"type": "path"},
            "dry_run": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    try:
        result = stage(module.params, check_mode=module.check_mode)
    except StagingError as error:
        error.result.pop("warnings", None)
        error.result.pop("changed", None)
        module.fail_json(msg=str(error), **error.result)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
