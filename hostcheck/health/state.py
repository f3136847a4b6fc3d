"""What the health check keeps between runs on the host: the streak of each measured check
and its last verdict and action (state.json), and a lock against two runs at once."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator

KIND = "hostcheck-healthcheck-state"
VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = "lock"


class Busy(Exception):
    """Another health check holds the lock."""


def load(folder: str) -> tuple[dict, str]:
    """The kept state, or an empty one and why (a missing file is not worth a word)."""
    path = os.path.join(folder, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}, ""
    except (OSError, ValueError) as exc:
        return {}, f"{path} unreadable, started afresh: {exc}"
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("version") != VERSION:
        return {}, f"{path} is not a state file of version {VERSION}, started afresh"
    return data, ""


def save(folder: str, streaks: dict, last: dict) -> None:
    from hostcheck.atomic import write_atomic

    document = {"kind": KIND, "version": VERSION, "streaks": streaks, "last": last}
    write_atomic(os.path.join(folder, STATE_FILE), json.dumps(document, indent=2) + "\n")


@contextlib.contextmanager
def locked(folder: str) -> Iterator[None]:
    os.makedirs(folder, mode=0o755, exist_ok=True)
    with open(os.path.join(folder, LOCK_FILE), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"another health check holds {handle.name}") from None
        yield
