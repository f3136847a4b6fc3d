"""The fleet's result as a JSON document (schema fleet-v1.json), JSON lines, and back:
a saved fleet document serves as a baseline."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hostcheck import __version__
from hostcheck.fleet.analyze import FleetReport
from hostcheck.report.entry import MARKER_STATES, REPORT, STATUSES, UNREADABLE, HostEntry
from hostcheck.report.extract import FLEET_KIND, Unusable, comparable, dataloader_of
from hostcheck.report.writers import json_safe

SCHEMA_VERSION = 1


def iso(timestamp: float) -> str:
    moment = dt.datetime.fromtimestamp(timestamp, tz=dt.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def summary(report: FleetReport) -> dict:
    baseline = report.baseline
    return {
        "kind": FLEET_KIND,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "hostcheck", "version": __version__},
        "generated_at": iso(report.generated_at),
        "directory": report.directory,
        "profile": {"name": report.profile_name, "sources": list(report.profile_sources)},
        "fail_on": report.fail_on,
        "exit_code": report.exit_code,
        "hosts_total": len(report.entries),
        "verdicts": report.verdict_counts,
        "baseline": {
            "source": baseline.source if baseline else None,
            "kind": baseline.kind if baseline else None,
            "note": report.baseline_note,
        },
        "ignored": list(report.ignored),
    }


def build(report: FleetReport) -> dict:
    document = summary(report)
    document["hosts"] = [entry.to_dict() for entry in report.entries]
    document["checks"] = [{"id": k, **row} for k, row in report.check_counts.items()]
    document["outliers"] = [o.to_dict() for o in report.outliers]
    document["drift"] = [c.to_dict() for c in report.drift]
    return json_safe(document)


def render_json(report: FleetReport) -> str:
    return json.dumps(build(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def render_jsonl(report: FleetReport) -> str:
    """One object a line: hosts, checks, outliers, drift, then the summary."""
    document = build(report)
    lines = []
    for kind, key in (("host", "hosts"), ("check", "checks"), ("outlier", "outliers")):
        lines += [{"type": kind, **item} for item in document.pop(key)]
    lines += [{"type": "drift", **item} for item in document.pop("drift")]
    lines.append({"type": "summary", **document})
    return "".join(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n" for line in lines)


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise Unusable(f"{where} is not an object")
    return value


def entries_from(document: dict) -> list[HostEntry]:
    """The hosts of a saved fleet document (a baseline); Unusable when it is not one."""
    if document.get("schema_version") != SCHEMA_VERSION:
        raise Unusable(f"fleet document schema version {document.get('schema_version')!r}")
    hosts = document.get("hosts")
    if not isinstance(hosts, list):
        raise Unusable("fleet document without a hosts list")
    entries = []
    for index, item in enumerate(hosts):
        where = f"hosts[{index}]"
        item = _mapping(item, where)
        host, state = item.get("host"), item.get("state")
        if not isinstance(host, str) or not host:
            raise Unusable(f"{where}.host is not a name")
        if state not in (REPORT, *MARKER_STATES, UNREADABLE):
            raise Unusable(f"{where}.state {state!r}")
        checks = _mapping(item.get("checks", {}), f"{where}.checks")
        if any(s not in STATUSES for s in checks.values()):
            raise Unusable(f"{where}.checks: a status is not one of {', '.join(STATUSES)}")
        values = _mapping(item.get("values", {}), f"{where}.values")
        entries.append(
            HostEntry(
                host=host,
                file=str(item.get("file", "")),
                state=state,
                reason=str(item.get("reason", "")),
                hostname=str(item.get("hostname", "")),
                started_at=str(item.get("started_at", "")),
                profile=str(item.get("profile", "")),
                checks={str(k): v for k, v in checks.items()},
                problems={
                    str(k): str(v) for k, v in _mapping(item.get("problems", {}), where).items()
                },
                values={
                    str(k): comparable(v) for k, v in values.items() if comparable(v) is not None
                },
                facts=dict(_mapping(item.get("facts", {}), f"{where}.facts")),
                dataloader=dataloader_of(item.get("dataloader")),
            )
        )
    return entries
