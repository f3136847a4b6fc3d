"""Outliers: hosts whose metric is far from the median of hosts with the same hardware.

Robust to the outliers themselves: the median absolute deviation (MAD) and the modified
z-score 0.6745 (x - median) / MAD. A host is an outlier when |z| exceeds `fleet.outliers.z`
and it differs from the median by more than `fleet.outliers.min_relative` of it; when MAD
is 0 (most hosts measure exactly alike) the second rule alone decides. Hosts are compared
only within groups of at least `fleet.outliers.min_group` hosts, whether or not each value
passed its own threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from hostcheck.fleet.settings import MAD_SCALE, FleetSettings
from hostcheck.report.entry import REPORT, HostEntry, natural_key


@dataclass(frozen=True)
class Outlier:
    host: str
    metric: str  # check.finding
    value: float
    median: float
    mad: float
    z: float | None  # None when MAD is 0
    group: str  # the hardware label
    group_size: int  # hosts of the group that measured this metric

    @property
    def ratio(self) -> float | None:
        return self.value / self.median if self.median else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["ratio"] = None if self.ratio is None else round(self.ratio, 4)
        data["z"] = None if self.z is None else round(self.z, 3)
        return data


def numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def median(ordered: list[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def groups(entries: Iterable[HostEntry]) -> dict[str, list[HostEntry]]:
    """Report entries by hardware label."""
    grouped: dict[str, list[HostEntry]] = {}
    for entry in entries:
        if entry.state == REPORT:
            grouped.setdefault(entry.hardware, []).append(entry)
    return grouped


def find_outliers(entries: Iterable[HostEntry], settings: FleetSettings) -> list[Outlier]:
    found = []
    compared: dict[str, bool] = {}
    for label, members in groups(entries).items():
        if len(members) < settings.min_group:
            continue
        by_metric: dict[str, list[tuple[float, str]]] = {}
        for entry in members:
            for metric, value in entry.values.items():
                if numeric(value):
                    by_metric.setdefault(metric, []).append((value, entry.host))
        for metric, pairs in by_metric.items():
            if len(pairs) < settings.min_group:
                continue
            if metric not in compared:
                compared[metric] = settings.compared(metric)
            if compared[metric]:
                found += _outliers_of(metric, pairs, label, settings)
    found.sort(key=lambda o: (natural_key(o.host), o.metric))
    return found


def _outliers_of(
    metric: str, pairs: list[tuple[float, str]], label: str, settings: FleetSettings
) -> list[Outlier]:
    ordered = sorted(value for value, _ in pairs)
    middle = median(ordered)
    if ordered[0] == ordered[-1]:
        return []
    mad = median(sorted(abs(value - middle) for value in ordered))
    floor = settings.min_relative * abs(middle)
    found = []
    for value, host in pairs:
        distance = value - middle
        if abs(distance) <= floor or distance == 0:
            continue
        z = MAD_SCALE * distance / mad if mad else None
        if z is None or abs(z) > settings.z:
            found.append(Outlier(host, metric, value, middle, mad, z, label, len(pairs)))
    return found
