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
# The dataloader check: the state of the host's DataLoader settings file, and the settings it
# recommends (null unless the state is ok).
DATALOADER_STATES = ("ok", "absent", "stale", "malformed")
DATALOADER_SETTINGS = (
    "num_workers",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "prefetcher",
)


def loader_text(dataloader: dict[str, Any]) -> str:
    """A host's recommended DataLoader settings in a few words ("4, pin, prefetch 2"): "-"
    without a settings file (or a dataloader check), the state when the file is unusable."""
    state = dataloader.get("state")
    if state in (None, "absent"):
        return "-"
    if state != "ok":
        return state
    workers = dataloader.get("num_workers")
    words = ["?" if workers is None else str(workers)]
    words.append({True: "pin", False: "no pin"}.get(dataloader.get("pin_memory"), "pin ?"))
    if workers:
        factor = dataloader.get("prefetch_factor")
        words.append(f"prefetch {'?' if factor is None else factor}")
        if dataloader.get("persistent_workers") is False:
            words.append("not persistent")
    if dataloader.get("prefetcher"):
        words.append("prefetcher")
    return ", ".join(words)


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
    # the dataloader check's {state, DATALOADER_SETTINGS}; {} when the report has no such check
    dataloader: dict[str, Any] = field(default_factory=dict)

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

    def shown(self, key: str) -> str:
        """A finding's value as its report showed it (check.finding): the display, else the
        value, "absent" when the host has none."""
        value = self.values.get(key)
        return self.displays.get(key) or ("absent" if value is None else str(value))

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
            "dataloader": self.dataloader,
        }
