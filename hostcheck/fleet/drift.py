"""Drift: what changed on each host since the baseline (the previous audit by default).

Facts (driver, GPUs, CPU, kernel, Pillow flavour, torch ...) and text values (limits that
read "unlimited", modes) count as changed when they differ at all; numbers when they moved
by more than their tolerance (`fleet.drift.tolerance`, per metric `fleet.drift.tolerances`).
The DataLoader settings file (the dataloader check): a change of its state (ok, absent,
stale, malformed), else of each recommended setting, when both reports have the check; its
findings' values are not compared as values (a report that gains the check is a check
change).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from hostcheck.fleet.outliers import numeric
from hostcheck.fleet.settings import FleetSettings
from hostcheck.report.entry import (
    DATALOADER_SETTINGS,
    REPORT,
    HostEntry,
    loader_text,
    natural_key,
)

FACT_LABELS = {
    "hostcheck": "hostcheck version",
    "os": "OS",
    "kernel": "kernel",
    "cpu_model": "CPU model",
    "gpu_model": "GPU model",
    "gpu_count": "GPU count",
    "driver": "NVIDIA driver",
    "cuda_driver": "CUDA of the driver",
    "torch": "torch",
    "pillow": "Pillow flavour",
}


@dataclass(frozen=True)
class Change:
    host: str
    kind: str  # new | gone | verdict | check | fact | value | dataloader
    key: str  # check id, fact name or metric; "" for new, gone and verdict
    before: Any
    after: Any
    note: str = ""  # "started failing", "+35%", the displays of the values

    def to_dict(self) -> dict:
        return asdict(self)


def _relative(before: float, after: float) -> float:
    if before == after:
        return 0.0
    return abs(after - before) / abs(before) if before else float("inf")


DATALOADER_NOTES = {
    "ok": "DataLoader settings file measured",
    "absent": "DataLoader settings file gone",
    "stale": "DataLoader settings file stale: measured on another host name or CPU count",
    "malformed": "DataLoader settings file malformed",
}


def dataloader_changes(host: str, before: dict, after: dict) -> list[Change]:
    """The settings file's state, else each recommended setting that changed; nothing when
    either report has no dataloader check (the check's own status change says that)."""
    if not before or not after:
        return []
    if before["state"] != after["state"]:
        note = DATALOADER_NOTES[after["state"]]
        if after["state"] == "ok":
            note += f": {loader_text(after)}"
        return [Change(host, "dataloader", "state", before["state"], after["state"], note)]
    return [
        Change(host, "dataloader", key, before.get(key), after.get(key), f"recommended {key}")
        for key in DATALOADER_SETTINGS
        if before.get(key) != after.get(key)
    ]


def compare_hosts(before: HostEntry, after: HostEntry, settings: FleetSettings) -> list[Change]:
    host = after.host
    changes = []
    if before.verdict != after.verdict:
        note = after.reason if after.state != REPORT else ", ".join(after.reasons)
        changes.append(Change(host, "verdict", "", before.verdict, after.verdict, note))
    if before.state != REPORT or after.state != REPORT:
        return changes
    for check_id in sorted(set(before.checks) | set(after.checks)):
        old, new = before.checks.get(check_id), after.checks.get(check_id)
        if old != new:
            note = ""
            if new in ("fail", "error") and old not in ("fail", "error"):
                note = f"started failing: {after.problems.get(check_id, '')}".rstrip(": ")
            elif old in ("fail", "error") and new == "pass":
                note = "recovered"
            changes.append(Change(host, "check", check_id, old, new, note))
    for fact in FACT_LABELS:
        old, new = before.facts.get(fact), after.facts.get(fact)
        if old != new:
            changes.append(Change(host, "fact", fact, old, new, FACT_LABELS[fact]))
    changes += dataloader_changes(host, before.dataloader, after.dataloader)
    covered = bool(before.dataloader or after.dataloader)
    for metric in sorted(set(before.values) | set(after.values)):
        old, new = before.values.get(metric), after.values.get(metric)
        if old == new or (covered and metric.startswith("dataloader.")):
            continue  # the dataloader check's findings: dataloader_changes() says it better
        tolerance = settings.tolerance_of(metric)
        if tolerance is None:
            continue
        note = f"{before.shown(metric)} -> {after.shown(metric)}"
        if numeric(old) and numeric(new):
            moved = _relative(old, new)
            if moved <= tolerance and tolerance > 0:
                continue
            change = "new value" if moved == float("inf") else f"{(new - old) / abs(old):+.0%}"
            note = f"{change}: {note}"
        changes.append(Change(host, "value", metric, old, new, note))
    return changes


def find_drift(
    baseline: Iterable[HostEntry], current: Iterable[HostEntry], settings: FleetSettings
) -> list[Change]:
    before = {entry.host: entry for entry in baseline}
    after = {entry.host: entry for entry in current}
    changes = []
    for host in sorted(set(before) | set(after), key=natural_key):
        if host not in before:
            changes.append(
                Change(host, "new", "", None, after[host].verdict, "not in the baseline")
            )
        elif host not in after:
            changes.append(
                Change(host, "gone", "", before[host].verdict, None, "not in this audit")
            )
        else:
            changes += compare_hosts(before[host], after[host], settings)
    return changes
