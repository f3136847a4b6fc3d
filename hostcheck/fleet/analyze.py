"""The fleet's verdict: host verdicts, per-check counts, outliers and drift, as plain data."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hostcheck.fleet.drift import Change, find_drift
from hostcheck.fleet.outliers import Outlier, find_outliers
from hostcheck.fleet.settings import FleetSettings
from hostcheck.report.entry import NOT_ASSESSED, REPORT, STATUSES, VERDICTS, HostEntry, natural_key

# Host verdicts that make `hostcheck fleet` exit 1 (and `warn` under --fail-on warn).
FAILING = ("fail", "error", *NOT_ASSESSED)


@dataclass
class Baseline:
    source: str  # the folder or file compared against
    kind: str  # folder | fleet (a fleet JSON output) | report (one host's report) | prometheus
    entries: list[HostEntry]


@dataclass
class FleetReport:
    directory: str
    entries: list[HostEntry]
    settings: FleetSettings
    profile_name: str = "default"
    profile_sources: list[str] = field(default_factory=list)
    fail_on: str = "fail"
    ignored: list[str] = field(default_factory=list)
    baseline: Baseline | None = None
    baseline_note: str = ""  # why there is no baseline
    outliers: list[Outlier] = field(default_factory=list)
    drift: list[Change] = field(default_factory=list)
    generated_at: float = field(default_factory=time.time)

    @property
    def verdict_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(VERDICTS, 0)
        for entry in self.entries:
            counts[entry.verdict] += 1
        return counts

    @property
    def check_counts(self) -> dict[str, dict[str, int]]:
        """Per check id, in order of first appearance: hosts per status, and `missing`:
        hosts whose report has no such check."""
        counts: dict[str, dict[str, int]] = {}
        reports = 0
        for entry in self.entries:
            if entry.state != REPORT:
                continue
            reports += 1
            for check_id, status in entry.checks.items():
                if check_id not in counts:
                    counts[check_id] = dict.fromkeys(STATUSES, 0)
                counts[check_id][status] += 1
        for row in counts.values():
            row["missing"] = reports - sum(row[s] for s in STATUSES)
        return counts

    def failing(self, entry: HostEntry) -> bool:
        return entry.verdict in FAILING or (self.fail_on == "warn" and entry.verdict == "warn")

    @property
    def exit_code(self) -> int:
        """0: every host assessed and none failed; 1: a host failed, broke, could not be
        reached or read (or warned, under --fail-on warn)."""
        return int(any(self.failing(entry) for entry in self.entries))


def analyze(
    directory: str,
    entries: list[HostEntry],
    settings: FleetSettings,
    baseline: Baseline | None = None,
    **details,
) -> FleetReport:
    entries = sorted(entries, key=lambda e: natural_key(e.host))
    report = FleetReport(directory, entries, settings, baseline=baseline, **details)
    report.outliers = find_outliers(entries, settings)
    if baseline is not None:
        report.drift = find_drift(baseline.entries, entries, settings)
    return report
