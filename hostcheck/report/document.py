"""The report document: everything a run measured, as plain data (schema in report-v1.json)."""

from __future__ import annotations

import datetime as dt
import os

from hostcheck import __version__
from hostcheck.runner import RunOutcome

SCHEMA_VERSION = 1


def os_release(text: str | None) -> dict:
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            values[key.strip()] = value.strip().strip('"')
    return {
        "id": values.get("ID", ""),
        "version_id": values.get("VERSION_ID", ""),
        "pretty_name": values.get("PRETTY_NAME", ""),
    }


def build_document(outcome: RunOutcome, exit_code: int, os_release_text: str | None) -> dict:
    started = dt.datetime.fromtimestamp(outcome.started_at, tz=dt.timezone.utc)
    uname = os.uname()  # what socket.gethostname(), platform.release() and machine() read
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "hostcheck", "version": __version__},
        "host": {
            "hostname": uname.nodename,
            "kernel": uname.release,
            "machine": uname.machine,
            "os": os_release(os_release_text),
        },
        "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "duration_s": round(outcome.duration_s, 3),
        "profile": {
            "name": outcome.profile.name,
            "sources": list(outcome.profile.sources),
            "values": outcome.profile.values,
        },
        "options": {
            "user": outcome.options.user,
            "dataset_path": outcome.options.dataset_path,
            "require_gpu": outcome.options.require_gpu,
        },
        "verdict": outcome.verdict().value,
        "exit_code": exit_code,
        "counts": dict(outcome.counts),
        "checks": [result.to_dict() for result in outcome.results],
    }
