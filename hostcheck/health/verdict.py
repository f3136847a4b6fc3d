"""The health verdict: the settings as they are now, and the measurements of the last full
report, a measured failure counting only when it repeats on consecutive measurements."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hostcheck.model import CheckResult, Status

HEALTHY, UNHEALTHY, UNKNOWN = "healthy", "unhealthy", "unknown"
EXIT_CODES = {HEALTHY: 0, UNHEALTHY: 1, UNKNOWN: 2}


@dataclass
class Verdict:
    state: str
    causes: list[str] = field(default_factory=list)  # why unhealthy, one phrase per check
    # the same causes as keys that stay put while values change: check.finding (the check's id
    # when it failed as a whole), for the history of drains and repairs
    cause_keys: list[str] = field(default_factory=list)
    watching: list[str] = field(default_factory=list)  # measured failures not yet confirmed
    unknown: list[str] = field(default_factory=list)  # checks that could not assess
    measurements: str = ""  # whose measurements stand, or why none do
    streaks: dict[str, dict] = field(default_factory=dict)  # the state to keep, per check

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.state]

    def summary(self) -> str:
        """The verdict in one line, without the node's name."""
        if self.state == UNHEALTHY:
            text = f"unhealthy: {'; '.join(self.causes)}"
        elif self.state == UNKNOWN:
            text = f"unknown: {'; '.join(self.unknown)}"
        else:
            text = "healthy"
        if self.watching:
            text += f" (watching {'; '.join(self.watching)})"
        return text


def phrase(check_id: str, parts: Iterable[str]) -> str:
    """What failed, in a few words: `shm: size 32.0 MiB (expected >= 1.0 GiB)`."""
    return f"{check_id}: {', '.join(parts)}"


def _phrase_of(result: CheckResult) -> str:
    bad = [f for f in result.findings if f.status == Status.FAIL]
    if not bad:
        return phrase(result.id, [result.summary])
    parts = []
    for finding in bad:  # the failing findings only, not the whole check's summary
        shown = f"{finding.name} {finding.display or finding.measured}"
        comparing = any(sign in shown for sign in ("<", ">", "!="))
        if finding.expected not in (None, "") and not comparing:
            shown += f" (expected {finding.expected})"
        parts.append(shown)
    return phrase(result.id, parts)


def cause_keys(result: CheckResult) -> list[str]:
    """`shm.size`, `gpu.gpu0 xid`: a failing check's failing findings, or its id alone."""
    bad = [f"{result.id}.{f.name}" for f in result.findings if f.status == Status.FAIL]
    return bad or [result.id]


def decide(
    settings: Iterable[CheckResult],
    measuring: Iterable[str],
    standing: Mapping[str, dict],
    not_standing_why: str,
    streaks_before: Mapping[str, dict],
    consecutive: int,
) -> Verdict:
    """settings: the run without measurements; measuring: the checks whose results come from
    the last full report; standing: that report's results while they stand (by check id);
    streaks_before: what the previous health check kept per measuring check."""
    verdict = Verdict(state=HEALTHY)
    for result in settings:
        if result.status == Status.FAIL:
            verdict.causes.append(_phrase_of(result))
            verdict.cause_keys += cause_keys(result)
        elif result.status == Status.ERROR:
            verdict.unknown.append(phrase(result.id, [result.summary]))
    at = sorted({c["data"]["measured_at"] for c in standing.values()})
    verdict.measurements = (
        f"measurements of {', '.join(at)} stand"
        if standing
        else f"no measurements stand: {not_standing_why or 'the last full report has none'}"
    )
    for check_id in measuring:
        before = streaks_before.get(check_id) or {}
        check = standing.get(check_id)
        if check is None:  # nothing current to count: the streak waits
            if before:
                verdict.streaks[check_id] = dict(before)
            continue
        measured_at = check["data"]["measured_at"]
        failed = check.get("status") == Status.FAIL.value
        failures = int(before.get("failures", 0))
        if measured_at != before.get("measured_at"):
            failures = failures + 1 if failed else 0
        verdict.streaks[check_id] = {
            "measured_at": measured_at,
            "status": check.get("status"),
            "failures": failures,
        }
        if not failed:
            continue
        result = CheckResult.from_dict(check)
        if failures >= consecutive:
            verdict.causes.append(f"{_phrase_of(result)} ({failures} measurements in a row)")
            verdict.cause_keys += cause_keys(result)
        else:
            verdict.watching.append(
                f"{check_id}: failed {failures} of the {consecutive} measurements in a row "
                "that drain"
            )
    if verdict.causes:
        verdict.state = UNHEALTHY
    elif verdict.unknown:
        verdict.state = UNKNOWN
    return verdict
