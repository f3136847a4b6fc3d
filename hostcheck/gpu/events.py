"""Xid and SXid events since boot, counted once each, kept between runs.

The source is the kernel's log: /dev/kmsg (root only where kernel.dmesg_restrict is 1, as on
Debian and RHEL), or a file in /dev/kmsg's record format (`prio,seq,usec,flags;message`).
hostcheck keeps, per boot, how far it has read and what it counted there (a small JSON file,
`events_state`), so an event counts once however often it is read, still counts after the
kernel's ring buffer has overwritten it, and a record of an earlier boot never counts again.
Where that file cannot be written (a run as a user), the counts are of what the log holds now.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hostcheck.gpu import xid
from hostcheck.system import System

KMSG = "/dev/kmsg"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
DEFAULT_STATE = "/var/lib/hostcheck/gpu-events.json"
STATE_VERSION = 1
_RECORD = re.compile(rb"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
_HEAD = 64  # bytes that identify a file beside its inode
_XID_LINE = re.compile(rb"^[^\n]*Xid[^\n]*$", re.MULTILINE)


@dataclass
class Read:
    """What a read of the log gave: every event counted since boot (by key), and notes."""

    events: dict[str, dict] = field(default_factory=dict)
    new: int = 0  # events this read added
    notes: list[str] = field(default_factory=list)
    problem: str | None = None  # the log could not be read at all
    kept: bool = False  # the counts were saved for the next run


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _device_records(path: Path) -> tuple[list[bytes], int]:
    """Every record /dev/kmsg holds now, and how many were overwritten while reading."""
    records, lost = [], 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the kernel overwrote the next record
                    lost += 1
                    continue
                raise
            if not chunk:
                break
            records.append(chunk)
    finally:
        os.close(fd)
    return records, lost


def _messages_after_seq(records: list[bytes], last_seq: int) -> tuple[list[tuple[int, str]], int]:
    """(seq, message) of the records after last_seq that mention Xid; the highest seq seen."""
    found, highest = [], last_seq
    for record in records:
        head, _, rest = record.partition(b";")
        fields = head.split(b",")
        if len(fields) < 3 or not fields[1].isdigit():
            continue
        seq = int(fields[1])
        highest = max(highest, seq)
        if seq <= last_seq or b"Xid" not in rest:
            continue
        message = rest.split(b"\n", 1)[0]  # continuation lines (" KEY=value") follow
        found.append((seq, message.decode(errors="replace")))
    return found, highest


def _file_messages(
    path: Path, position: dict, notes: list[str]
) -> tuple[list[tuple[int, str]], dict]:
    """(seq, message) of the Xid lines added since position; the new position. A file replaced
    (another inode) or shorter than the offset is read from its start."""
    info = path.stat()
    start = int(position.get("offset", 0))
    with open(path, "rb") as handle:
        head = handle.read(_HEAD).hex()
    # an inode number is reused at once where a log is removed and made anew; its first bytes
    # tell the new file from the old
    same = position.get("inode") == [info.st_dev, info.st_ino] and (
        head.startswith(position.get("head", "")) or position.get("head", "").startswith(head)
    )
    if not same and position:
        notes.append(f"{path} was replaced or rewritten since the last read: read from its start")
        start = 0
    elif start > info.st_size:
        notes.append(f"{path} is shorter than where the last read ended: read from its start")
        start = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read()
    # a last line still being written is left for the next read
    complete = data.rfind(b"\n") + 1
    found = []
    # seqs rise through a boot whatever file holds them: a copy made anew skips what counted
    last_seq = int(position.get("seq", -1))
    for match in _XID_LINE.finditer(data, 0, complete):
        line = match.group(0)
        record = _RECORD.match(line)
        seq = int(record.group(2)) if record else -1
        if record and seq <= last_seq:
            continue
        found.append((seq, (record.group(4) if record else line).decode(errors="replace")))
        last_seq = max(last_seq, seq)
    return found, {
        "inode": [info.st_dev, info.st_ino],
        "head": head,
        "offset": start + complete,
        "seq": last_seq,
    }


def _load(path: Path, boot_id: str, source: str) -> tuple[dict, str | None]:
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:
        return {}, f"{path} unreadable ({exc}): counted anew"
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return {}, f"{path} is of another version: counted anew"
    if state.get("boot_id") != boot_id:
        return {}, None  # a reboot: the counts of the last boot no longer stand
    if state.get("source") != source:
        return {}, f"the log read changed from {state.get('source')} to {source}: counted anew"
    return state, None


def _add(events: dict[str, dict], seq: int, message: str, seen_at: str) -> bool:
    event = xid.parse(message)
    if event is None:
        return False
    key = f"{event.kind}:{event.code}:{event.bus_id}"
    counted = events.get(key)
    if counted is None:
        events[key] = counted = {
            "kind": event.kind,
            "code": event.code,
            "bus_id": event.bus_id,
            "fatal": event.fatal,
            "count": 0,
            "first_seen": seen_at,
        }
    counted["count"] += 1
    counted["last_seen"] = seen_at
    counted["last_seq"] = seq
    counted["last_text"] = event.text[:200]
    return True


def read_since_boot(system: System, source: str, state_path: str | None) -> Read:
    """The events of this boot, counted once: from the saved counts and the log's records
    after the saved position. Saves both again when state_path can be written."""
    result = Read()
    boot_id = (system.read(BOOT_ID) or "").strip() or "unknown"
    real_source = system.path(source)
    real_state = system.path(state_path) if state_path else None
    lock = None
    if real_state is not None:
        try:
            real_state.parent.mkdir(parents=True, exist_ok=True)
            lock = open(f"{real_state}.lock", "a")  # noqa: SIM115 - held until the end
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError as exc:
            result.notes.append(f"counts not kept ({exc.strerror or exc}): counted from the log")
            real_state = None
    try:
        state, note = _load(real_state, boot_id, source) if real_state else ({}, None)
        if note:
            result.notes.append(note)
        position = dict(state.get("position") or {})
        events = {k: dict(v) for k, v in (state.get("events") or {}).items()}
        try:
            if real_source.is_char_device():
                records, lost = _device_records(real_source)
                found, highest = _messages_after_seq(records, int(position.get("seq", -1)))
                if lost:
                    result.notes.append(f"{lost} records were overwritten while reading")
                position = {"seq": highest}
            else:
                found, position = _file_messages(real_source, position, result.notes)
        except OSError as exc:
            result.problem = f"cannot read {source}: {exc.strerror or exc}"
            return result
        seen_at = _now()
        for seq, message in found:
            result.new += _add(events, seq, message, seen_at)
        result.events = events
        if real_state is not None:
            from hostcheck.atomic import write_atomic

            document = {
                "version": STATE_VERSION,
                "boot_id": boot_id,
                "source": source,
                "position": position,
                "events": events,
            }
            try:
                write_atomic(str(real_state), json.dumps(document, indent=1, sort_keys=True) + "\n")
                result.kept = True
            except OSError as exc:
                result.notes.append(f"counts not kept ({exc.strerror or exc})")
        return result
    finally:
        if lock is not None:
            with contextlib.suppress(OSError):
                lock.close()
