"""Reading an audit folder: every `<host>.json` becomes a HostEntry, whatever is in it.

The folder the audit playbook writes (`reports/<UTC timestamp>/`):
  <host>.json   the host's hostcheck JSON report, or an audit marker document
                ({"kind": "hostcheck-audit-marker", "host", "state", "reason", "at"})
                where the host could not be reached, timed out or left no report.
Files that are empty, truncated, not JSON, not a report, of a newer schema or unreadable
become `unreadable` entries with the reason. Hidden files, other suffixes and fleet
outputs (`hostcheck fleet --format json` saved in the folder) are not inputs.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import stat
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hostcheck.report.entry import UNREADABLE, HostEntry, natural_key
from hostcheck.report.extract import Unusable, clean, from_document

MAX_BYTES = 64 * 2**20  # a report is ~35 KB; anything this large is not one
PARALLEL_FROM = 200  # files; fewer are read in this process
AUDIT_NAME = re.compile(r"^\d{8}T\d{6}Z$")  # reports/20261122T053000Z
SUMMARY = ".fleet.json"  # a folder's own fleet summary (hidden: never an input)


@dataclass
class Folder:
    path: str
    entries: list[HostEntry] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # names that are not inputs


def list_inputs(directory: str) -> tuple[list[str], list[str]]:
    """(input names, ignored names); OSError when the folder cannot be listed."""
    inputs, ignored = [], []
    for name in os.listdir(directory):
        if name.endswith(".json") and len(name) > 5 and not name.startswith("."):
            inputs.append(name)
        else:
            ignored.append(name)
    return sorted(inputs, key=natural_key), sorted(ignored)


def read_bytes(path: str) -> bytes:
    """A regular file's bytes; never blocks on a FIFO; Unusable with the reason otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno is not None and os.path.isdir(path):
            raise Unusable("a directory, not a file") from None
        raise Unusable(f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(info.st_mode):
        problem = "a directory, not a file"
    elif not stat.S_ISREG(info.st_mode):
        problem = "not a regular file"
    elif info.st_size > MAX_BYTES:
        problem = f"too large for a report: {info.st_size} bytes"
    if problem:
        os.close(fd)
        raise Unusable(problem)
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read(MAX_BYTES + 1)
        except OSError as exc:
            raise Unusable(f"cannot read: {exc.strerror or exc}") from None


def parse(raw: bytes) -> Any:
    if not raw.strip():
        raise Unusable("empty file" if not raw else "empty file (only white space)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unusable(f"not UTF-8 text (binary?): byte {exc.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # a string that runs to the end of the file is one too: it cannot hold a newline
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise Unusable(f"truncated JSON: ends after {len(raw)} bytes") from None
        raise Unusable(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # 5000-digit integers, nesting too deep
        raise Unusable(f"not usable JSON: {type(exc).__name__}") from None


def read_entry(directory: str, name: str) -> HostEntry | None:
    """The entry for one file of an audit folder; None for a fleet output in it."""
    host = clean(name[: -len(".json")])
    try:
        return from_document(parse(read_bytes(os.path.join(directory, name))), host, clean(name))
    except Unusable as exc:
        return HostEntry(host=host, file=clean(name), state=UNREADABLE, reason=str(exc))
    except Exception as exc:  # a report is never allowed to stop the others
        reason = clean(f"internal error reading it: {type(exc).__name__}: {exc}")
        return HostEntry(host=host, file=clean(name), state=UNREADABLE, reason=reason[:300])


def _read_chunk(items: list[tuple[str, str]]) -> list[HostEntry | None]:
    return [read_entry(directory, name) for directory, name in items]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _read_many(items: list[tuple[str, str]], jobs: int) -> list[HostEntry | None]:
    if jobs <= 1 or len(items) < PARALLEL_FROM:
        return _read_chunk(items)
    size = max(50, -(-len(items) // (jobs * 4)))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return [entry for chunk in pool.map(_read_chunk, chunks) for entry in chunk]


def read_folders(paths: list[str], jobs: int = 1) -> list[Folder]:
    """Every folder's entries, read together (in `jobs` processes when there are many).
    OSError when a folder cannot be listed."""
    folders, items = [], []
    for path in paths:
        inputs, ignored = list_inputs(path)
        folders.append(Folder(path, ignored=ignored))
        items += [(path, name) for name in inputs]
    by_path = {folder.path: folder for folder in folders}
    for (path, name), entry in zip(items, _read_many(items, jobs)):
        if entry is None:
            by_path[path].ignored.append(name)
        else:
            by_path[path].entries.append(entry)
    return folders


def previous_audit(directory: str) -> str | None:
    """The audit folder before this one: the latest sibling named by a UTC timestamp that
    sorts before this folder's name; None when this folder is not named so or is first."""
    real = os.path.realpath(directory)
    parent, name = os.path.split(real)
    if not AUDIT_NAME.match(name):
        return None
    try:
        earlier = [
            n
            for n in os.listdir(parent)
            if AUDIT_NAME.match(n) and n < name and os.path.isdir(os.path.join(parent, n))
        ]
    except OSError:
        return None
    return os.path.join(parent, max(earlier)) if earlier else None


def read_baseline_file(path: str) -> tuple[str, list[HostEntry]]:
    """("fleet", hosts) for a saved `hostcheck fleet --format json`, ("report", [host]) for
    one host's report named `<host>.json`; Unusable with the reason otherwise."""
    from hostcheck.fleet import document as fleet_document

    parsed = parse(read_bytes(path))
    name = os.path.basename(path)
    host = name[: -len(".json")] if name.endswith(".json") else name
    if isinstance(parsed, dict) and parsed.get("kind") == "hostcheck-fleet":
        return "fleet", fleet_document.entries_from(parsed)
    entry = from_document(parsed, host, name)
    if entry is None or entry.state == UNREADABLE:
        raise Unusable("not a hostcheck report or fleet output")
    return "report", [entry]


def saved_summary(folder: str) -> list[HostEntry] | None:
    """The hosts of `<folder>/.fleet.json` (`hostcheck fleet DIR --report json:DIR/.fleet.json`)
    when it is a fleet document of exactly this folder's files, written after all of them;
    None otherwise. Reading it instead of 10,000 reports makes the drift 10x cheaper."""
    from hostcheck.fleet import document as fleet_document

    path = os.path.join(folder, SUMMARY)
    try:
        saved_at = os.stat(path).st_mtime
        inputs, _ = list_inputs(folder)
        if any(os.stat(os.path.join(folder, name)).st_mtime > saved_at for name in inputs):
            return None
        parsed = parse(read_bytes(path))
        if not isinstance(parsed, dict) or parsed.get("kind") != "hostcheck-fleet":
            return None
        entries = fleet_document.entries_from(parsed)
    except (OSError, Unusable):
        return None
    if sorted(entry.file for entry in entries) != sorted(clean(name) for name in inputs):
        return None
    return entries
