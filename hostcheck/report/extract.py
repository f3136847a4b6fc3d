"""A parsed JSON document from an audit folder -> a HostEntry, or the reason it is unusable.

Reports are untrusted input. Full JSON Schema validation costs about 7 ms a report (70 s
for 10,000), so this checks the structure of every key fleet reads, with the schema's
rules (report-v1.json), and ignores the rest of the document.

Beside the report's writers because three read a report this way: `hostcheck fleet`, the
measurements a run reuses (hostcheck.reuse) and the Prometheus textfile's info series
(hostcheck.report.writers), which a fleet read from Prometheus turns back into a HostEntry.
"""

from __future__ import annotations

import math
import re
from typing import Any

from hostcheck.report.document import SCHEMA_VERSION
from hostcheck.report.entry import (
    DATALOADER_SETTINGS,
    DATALOADER_STATES,
    MARKER_KIND,
    MARKER_STATES,
    STATUSES,
    HostEntry,
)

FLEET_KIND = "hostcheck-fleet"
CHECK_ID = re.compile(r"^[a-z][a-z0-9_-]*$")
MAX_TEXT = 300  # longest string kept from a report (summaries, values)


class Unusable(ValueError):
    """The document is not a report fleet can count; the message says why."""


def clean(text: str) -> str:
    """Text that can be written as UTF-8: lone surrogates (from JSON escapes such as
    \\ud800, or from file names that are not UTF-8) become their escape sequence."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    text = value if type(value) is str else str(value)
    if not text.isascii():
        text = clean(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _need(container: dict, key: str, kind: type | tuple, where: str) -> Any:
    if key not in container:
        raise Unusable(f"schema-invalid: {where}{key} missing")
    value = container[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise Unusable(f"schema-invalid: {where}{key} is {_kind(value)}")
    return value


def _status(container: dict, where: str) -> str:
    status = _need(container, "status", str, where)
    if status not in STATUSES:
        raise Unusable(
            f"schema-invalid: {where}status {_text(status, 40)!r} is not one of "
            f"{', '.join(STATUSES)}"
        )
    return status


def comparable(measured: Any) -> Any:
    """A finding's measured value as fleet compares it: numbers, strings, booleans and
    lists of those; None for what it does not compare (objects, nothing measured)."""
    if isinstance(measured, bool) or measured is None:
        return measured
    if isinstance(measured, int):
        return measured if abs(measured) < 2**63 else float(measured)
    if isinstance(measured, float):
        return measured if math.isfinite(measured) else str(measured)
    if isinstance(measured, str):
        return _text(measured)
    if isinstance(measured, list) and all(
        isinstance(v, (str, int, float)) or v is None for v in measured
    ):
        return _text(" ".join("null" if v is None else str(v) for v in measured))
    return None


def from_document(document: Any, host: str, file: str) -> HostEntry | None:
    """The entry for one parsed file; None for a fleet output lying in the folder."""
    if not isinstance(document, dict):
        raise Unusable(f"foreign: {_kind(document)}, not a hostcheck report")
    kind = document.get("kind")
    if kind == MARKER_KIND:
        return from_marker(document, host, file)
    if kind == FLEET_KIND:
        return None
    return from_report(document, host, file)


def from_marker(document: dict, host: str, file: str) -> HostEntry:
    state = document.get("state")
    if state not in MARKER_STATES:
        raise Unusable(
            f"audit marker: state {_text(state, 40)!r} is not one of {', '.join(MARKER_STATES)}"
        )
    reason = document.get("reason")
    reason = _text(reason) if isinstance(reason, str) and reason else state
    at = document.get("at")
    return HostEntry(
        host=host,
        file=file,
        state=state,
        reason=reason,
        started_at=_text(at, 40) if isinstance(at, str) else "",
    )


def from_report(document: dict, host: str, file: str) -> HostEntry:
    version = document.get("schema_version")
    tool = document.get("tool")
    tool_name = tool.get("name") if isinstance(tool, dict) else None
    if version is None and tool_name != "hostcheck":
        raise Unusable("foreign: a JSON object without schema_version, not a hostcheck report")
    if not isinstance(version, int) or isinstance(version, bool):
        raise Unusable(f"schema-invalid: schema_version is {_kind(version)}")
    if version > SCHEMA_VERSION:
        raise Unusable(
            f"newer schema: report schema version {version}, this hostcheck reads "
            f"{SCHEMA_VERSION} (upgrade hostcheck where fleet runs)"
        )
    if version < SCHEMA_VERSION:
        raise Unusable(f"schema-invalid: unknown schema version {version}")
    if tool_name != "hostcheck":
        raise Unusable(f"foreign: tool.name is {_text(tool_name, 40)!r}, not 'hostcheck'")
    facts: dict[str, Any] = {"hostcheck": _text(tool.get("version", ""), 40)}
    machine = _need(document, "host", dict, "")
    hostname = _need(machine, "hostname", str, "host.")
    os_info = machine.get("os") if isinstance(machine.get("os"), dict) else {}
    facts["os"] = _text(os_info.get("pretty_name") or "", 80) or None
    facts["kernel"] = _text(machine.get("kernel") or "", 80) or None
    started = document.get("started_at")
    profile = document.get("profile")
    entry = HostEntry(
        host=host,
        file=file,
        hostname=_text(hostname, 120),
        started_at=_text(started, 40) if isinstance(started, str) else "",
        profile=_text(profile.get("name", ""), 80) if isinstance(profile, dict) else "",
        facts=facts,
    )
    data: dict[str, dict] = {}
    for index, check in enumerate(_need(document, "checks", list, "")):
        where = f"checks[{index}]."
        if not isinstance(check, dict):
            raise Unusable(f"schema-invalid: checks[{index}] is {_kind(check)}")
        check_id = _need(check, "id", str, where)
        if not CHECK_ID.match(check_id) or len(check_id) > 64:
            raise Unusable(f"schema-invalid: {where}id {_text(check_id, 40)!r}")
        if check_id in entry.checks:
            raise Unusable(f"schema-invalid: check {check_id} appears twice")
        status = _status(check, where)
        entry.checks[check_id] = status
        data[check_id] = _need(check, "data", dict, where)
        if status != "pass":
            summary = check.get("summary")
            entry.problems[check_id] = _text(summary) if isinstance(summary, str) else ""
        _take_findings(entry, check_id, _need(check, "findings", list, where), where)
    facts.update(hardware_facts(data))
    entry.dataloader = dataloader_of(data.get("dataloader"))
    return entry


def _take_findings(entry: HostEntry, check_id: str, findings: list, where: str) -> None:
    values, displays, statuses = entry.values, entry.displays, entry.statuses
    for index, finding in enumerate(findings):
        # the checks of _need and _status, inlined: this loop runs ~40 times a report
        if not (
            type(finding) is dict
            and type(finding.get("name")) is str
            and finding.get("status") in STATUSES
            and "measured" in finding
        ):
            at = f"{where}findings[{index}]"
            if not isinstance(finding, dict):
                raise Unusable(f"schema-invalid: {at} is {_kind(finding)}")
            _need(finding, "name", str, at + ".")
            _status(finding, at + ".")
            raise Unusable(f"schema-invalid: {at}.measured missing")
        name = finding["name"]
        value = comparable(finding["measured"])
        if value is None or not name:
            continue
        key = f"{check_id}.{_text(name, 80)}"
        while key in values:  # the same finding name twice in one check
            key += "'"
        values[key] = value
        statuses[key] = finding["status"]
        display = finding.get("display")
        if type(display) is str and display and display != str(value):
            displays[key] = _text(display, 120)


def _get(data: dict, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _short(value: Any, limit: int = 120) -> str | None:
    return _text(value, limit) if isinstance(value, (str, int, float)) and value != "" else None


def hardware_facts(data: dict[str, dict]) -> dict[str, Any]:
    """Facts from the checks' raw data: what the host is and what it runs."""
    gpu = data.get("gpu", {})
    names = [g.get("name") for g in gpu.get("gpus") or () if isinstance(g, dict)]
    models = sorted({_text(n, 80) for n in names if isinstance(n, str) and n})
    count = len(names)
    if not count and isinstance(gpu.get("pci_gpus"), list):  # no driver: the PCI bus's view
        devices = [g.get("device_id") for g in gpu["pci_gpus"] if isinstance(g, dict)]
        count = len(devices)
        models = sorted({f"PCI device {_text(d, 20)}" for d in devices if isinstance(d, str)})
    pillow = data.get("pillow", {})
    flavour = None
    name, version = _get(pillow, "distribution", "name"), _get(pillow, "distribution", "version")
    if isinstance(name, str) and name:
        flavour = _text(f"{name} {version}" if isinstance(version, str) else name, 80)
        if pillow.get("avx2_build") is True:
            flavour += " (AVX2)"
    return {
        "cpu_model": _short(_get(data, "cpu", "model")),
        "gpu_model": ", ".join(models) or None,
        "gpu_count": count,
        "driver": _short(gpu.get("driver_version"), 40),
        "cuda_driver": _short(gpu.get("cuda_driver_version"), 40),
        "torch": _short(_get(gpu, "torch", "version"), 40),
        "pillow": flavour,
    }


def _setting(key: str, value: Any) -> Any:
    """A recommended DataLoader setting as fleet keeps it: counts as integers (workers from
    0, prefetch_factor from 1), switches as booleans; None for anything else."""
    if key in ("num_workers", "prefetch_factor"):
        ok = type(value) is int and (0 if key == "num_workers" else 1) <= value < 2**31
        return value if ok else None
    return value if type(value) is bool else None


def dataloader_of(data: Any) -> dict[str, Any]:
    """The dataloader check's state and settings, from its data (or a saved fleet output's
    `dataloader`); {} when there is none or its state is not one fleet knows. The settings
    are None unless the state is ok."""
    if not isinstance(data, dict) or data.get("state") not in DATALOADER_STATES:
        return {}
    state = data["state"]
    return {
        "state": state,
        **{k: _setting(k, data.get(k)) if state == "ok" else None for k in DATALOADER_SETTINGS},
    }
