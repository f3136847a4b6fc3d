"""One host of an audit as `hostcheck fleet` sees it: its report boiled down, or why there
is no usable report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hostcheck.model import Status, worst

STATUSES = tuple(s.value for s in Status)  # pass warn fail skip error
REPORT = "report"
# A marker document stands where a host's report should be (written by the audit playbook).
MARKER_KIND = "hostcheck-audit-marker"
MARKER_STATES = ("unreachable", "timeout", "no-report")
UNREADABLE = "unreadable"
# Host verdicts, from best to worst as the fleet orders them.
VERDICTS = ("pass", "skip", "warn", "error", "fail", *MARKER_STATES, UNREADABLE)
NOT_ASSESSED = (*MARKER_STATES, UNREADABLE)


def natural_key(text: str) -> tuple:
    """node2 before node10."""
    return tuple(
        int(p) if p.isdecimal() and p.isascii() else p for p in re.split(r"([0-9]+)", text)
    )


@dataclass
class HostEntry:
    """A host's report reduced to what fleet compares, or a marker or unreadable file."""

    host: str  # the file name without .json: the inventory name
    file: str  # the file name in the audit folder
    state: str = REPORT  # report | unreachable | timeout | no-report | unreadable
    reason: str = ""  # why there is no usable report
    hostname: str = ""  # what the report says the host calls itself
    started_at: str = ""
    profile: str = ""
    checks: dict[str, str] = field(default_factory=dict)  # check id -> status
    problems: dict[str, str] = field(default_factory=dict)  # check id -> summary unless pass
    values: dict[str, Any] = field(default_factory=dict)  # check.finding -> measured
    displays: dict[str, str] = field(default_factory=dict)  # check.finding -> display
    statuses: dict[str, str] = field(default_factory=dict)  # check.finding -> its status
    facts: dict[str, Any] = field(default_factory=dict)  # driver, gpu_model, cpu_model ...

    @property
    def verdict(self) -> str:
        if self.state != REPORT:
            return self.state
        ran = [Status(s) for s in self.checks.values() if s != "skip"]
        return worst(ran).value if ran else "skip"

    @property
    def reasons(self) -> list[str]:
        """The checks behind the verdict: failing and broken ones, else warning ones."""
        bad = [c for c, s in self.checks.items() if s in ("fail", "error")]
        return bad or [c for c, s in self.checks.items() if s == "warn"]

    @property
    def hardware(self) -> str:
        """Hosts with the same label are expected to measure alike."""
        facts = self.facts
        count = facts.get("gpu_count") or 0
        gpus = f"{count} x {facts.get('gpu_model') or 'unknown GPU'}" if count else "no GPU"
        return f"{gpus} | {facts.get('cpu_model') or 'unknown CPU'}"

    def describe(self, check_id: str) -> str:
        return self.problems.get(check_id, "")

    def to_dict(self) -> dict:
        return {
            "host": self.host,
            "file": self.file,
            "state": self.state,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "reason": self.reason,
            "hostname": self.hostname,
            "started_at": self.started_at,
            "profile": self.profile,
            "hardware": self.hardware if self.state == REPORT else "",
            "checks": self.checks,
            "problems": self.problems,
            "facts": self.facts,
            "values": self.values,
        }
