"""The copy, plan and commit modes of the dataset_stage module (plugins/modules/dataset_stage.py):
what is already in place at the destination (the records of the last run, or hashing), the
free-space check, copies written under a temporary name and renamed into place once verified,
and the records, whose .sha256 exists only while the destination matches it completely.
Standard library only: it runs on the hosts."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from typing import NamedTuple

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_files import (
    STAGING_TEMP,
    StagingError,
    atomic_write,
    chunks,
    drop_page_cache,
    fsync_directory,
    hash_descriptor,
    hash_file,
    rate,
    remove_quietly,
    run_parallel,
    temp_name,
    walk,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_manifest import (
    Wanted,
    escape,
    manifest_files,
    parse_manifest,
    parse_sizes,
    source_files,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import format_size

STATE_FORMAT = 1
RECOPIED_SHOWN = 50
TO_COPY_SHOWN = 1000


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
            f"dataset_staging_datasets[{name}]: needs {needed} bytes ({format_size(needed)}) on "
            f"{mount}, only {free} bytes ({format_size(free)}) free"
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
            f"{self.name}: {counts['files_copied']} files {format_size(counts['bytes_copied'])} "
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
                f"{self.name}: would copy {len(to_copy)} files {format_size(needed)}, "
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
            f"{self.name}: {len(paths)} files {format_size(needed)} to push, "
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
