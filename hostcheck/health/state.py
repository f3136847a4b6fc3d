"""What the health check keeps between runs on the host: the streak of each measured check,
its last verdict and action, and the history of its drains and resumes (state.json), and a lock
against two runs at once."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence

KIND = "hostcheck-healthcheck-state"
VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = "lock"
# The history of drains and resumes: the entries of the last HISTORY_DAYS, at most
# HISTORY_LENGTH of them; the counts go on for the life of the state file.
HISTORY_DAYS = 30
HISTORY_LENGTH = 100
ACTIONS = ("drained", "resumed", "repaired")  # repaired: by playbooks/repair.yml
LOCK_POLL_S = 0.1


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


def recorded(
    kept: dict, done: str, causes: Sequence[str], at: dt.datetime
) -> tuple[list[dict], dict[str, int]]:
    """The history and counts to keep after this run: `done` (one of ACTIONS, or "") added
    with its causes (a resume names those of the drain it ends), entries older than
    HISTORY_DAYS or past HISTORY_LENGTH dropped."""
    history = [e for e in kept.get("history") or [] if _is_entry(e)]
    counts = {a: int((kept.get("counts") or {}).get(a, 0)) for a in ACTIONS}
    if done:
        if done == "resumed":
            drains = [e for e in history if e["action"] == "drained"]
            causes = drains[-1]["causes"] if drains else []
        history.append({"at": stamp(at), "action": done, "causes": list(causes)})
        counts[done] += 1
    oldest = stamp(at - dt.timedelta(days=HISTORY_DAYS))
    history = [e for e in history if e["at"] >= oldest][-HISTORY_LENGTH:]
    return history, counts


def stamp(at: dt.datetime) -> str:
    """UTC, to the second: such stamps sort as their times do."""
    return f"{at.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"


def _is_entry(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("at"), str)
        and entry.get("action") in ACTIONS
        and isinstance(entry.get("causes"), list)
    )


def save(
    folder: str,
    streaks: dict,
    last: dict,
    history: Sequence[dict] = (),
    counts: dict[str, int] | None = None,
) -> None:
    from hostcheck.atomic import write_atomic

    document = {
        "kind": KIND,
        "version": VERSION,
        "streaks": streaks,
        "last": last,
        "history": list(history),
        "counts": counts or dict.fromkeys(ACTIONS, 0),
    }
    write_atomic(os.path.join(folder, STATE_FILE), json.dumps(document, indent=2) + "\n")


@contextlib.contextmanager
def locked(folder: str, wait_s: float = 0.0) -> Iterator[None]:
    """The state folder's lock. A health check that finds it held gives up at once (wait_s 0:
    that run says unknown); a repair recording into the history waits up to wait_s for the
    health check holding it."""
    os.makedirs(folder, mode=0o755, exist_ok=True)
    with open(os.path.join(folder, LOCK_FILE), "a") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f" (waited {wait_s:g} s)" if wait_s else ""
                    raise Busy(f"another health check holds {handle.name}{waited}") from None
                time.sleep(LOCK_POLL_S)
        yield
