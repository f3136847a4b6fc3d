"""Result types shared by every check and every report format."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]


# Order used to combine statuses: the worst one wins; skip only wins over nothing.
_RANK = {Status.SKIP: 0, Status.PASS: 1, Status.WARN: 2, Status.FAIL: 3, Status.ERROR: 4}


def worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=lambda s: s.rank, default=Status.SKIP)


# A GPU reset, or a reboot (which resets every GPU too): what the repair loop can ask Slurm for.
GPU_RESET, REBOOT = "gpu_reset", "reboot"
CLEARED_BY = ("", GPU_RESET, REBOOT)


@dataclass
class Finding:
    """One measured item inside a check, e.g. the soft nofile limit of a login session."""

    name: str
    status: Status
    measured: Any
    expected: Any = None
    display: str = ""
    source: str = ""
    remedy: str = ""
    unit: str = ""  # of measured, one of hostcheck.units.FINDING_UNITS ("" for a count or text)
    # what clears a failing finding without a person or a role: CLEARED_BY ("" when neither)
    cleared_by: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """The finding a report recorded (to_dict's output)."""
        return cls(**{**data, "status": Status(data["status"])})


@dataclass
class CheckResult:
    id: str
    status: Status
    summary: str
    expected: str = ""
    remedy: str = ""
    findings: list[Finding] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    duration_s: float = 0.0

    @classmethod
    def from_findings(
        cls,
        check_id: str,
        findings: list[Finding],
        data: dict | None = None,
        summary: str | None = None,
        expected: str | None = None,
    ) -> CheckResult:
        """Status is the worst finding; summary and remedy come from the findings that matter."""
        status = worst(f.status for f in findings)
        bad = [f for f in findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]
        shown = bad or findings
        if summary is None:
            summary = "; ".join(f"{f.name} {f.display or f.measured}" for f in shown)
        if expected is None:
            expected = "; ".join(
                f"{f.name} {f.expected}" for f in shown if f.expected not in (None, "")
            )
        remedies = []
        for f in bad:
            if f.remedy and f.remedy not in remedies:
                remedies.append(f.remedy)
        return cls(
            id=check_id,
            status=status,
            summary=summary,
            expected=expected,
            remedy="; ".join(remedies),
            findings=findings,
            data=data or {},
        )

    @classmethod
    def skipped(cls, check_id: str, reason: str, data: dict | None = None) -> CheckResult:
        return cls(id=check_id, status=Status.SKIP, summary=reason, data=data or {})

    @classmethod
    def from_dict(cls, data: dict) -> CheckResult:
        """The result a report recorded (to_dict's output)."""
        return cls(
            id=data["id"],
            status=Status(data["status"]),
            summary=data["summary"],
            expected=data["expected"],
            remedy=data["remedy"],
            findings=[Finding.from_dict(f) for f in data["findings"]],
            data=dict(data["data"]),
            duration_s=data["duration_s"],
        )

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "status": self.status.value,
            "summary": self.summary,
            "expected": self.expected,
            "remedy": self.remedy,
            "duration_s": round(self.duration_s, 4),
            "findings": [f.to_dict() for f in self.findings],
            "data": self.data,
        }
