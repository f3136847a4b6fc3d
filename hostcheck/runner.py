"""Run the enabled checks of a profile and collect their results."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Callable

from hostcheck.checks.base import CheckContext, CheckSpec, RunOptions
from hostcheck.config import Profile
from hostcheck.model import CheckResult, Status, worst
from hostcheck.system import System


@dataclass
class RunOutcome:
    results: list[CheckResult]
    started_at: float
    duration_s: float
    profile: Profile
    options: RunOptions
    counts: dict[str, int] = field(default_factory=dict)

    def verdict(self) -> Status:
        ran = [r.status for r in self.results if r.status != Status.SKIP]
        return worst(ran) if ran else Status.SKIP

    def exit_code(self, fail_on: Status = Status.FAIL) -> int:
        """0 nothing failed, 1 a check failed (or warned under --fail-on warn), 2 could not
        assess: a definite failure outranks an error in another check."""
        statuses = {r.status for r in self.results}
        if Status.FAIL in statuses or (fail_on == Status.WARN and Status.WARN in statuses):
            return 1
        if Status.ERROR in statuses:
            return 2
        return 0


def run_one(spec: CheckSpec, ctx: CheckContext) -> CheckResult:
    start = time.perf_counter()
    try:
        result = spec.run(ctx)
    except Exception as exc:  # a broken check is reported, never crashes the run
        where = traceback.extract_tb(exc.__traceback__)[-1]
        result = CheckResult(
            id=spec.id,
            status=Status.ERROR,
            summary=f"internal error: {type(exc).__name__}: {exc}",
            data={"traceback_at": f"{where.filename}:{where.lineno}"},
        )
    result.duration_s = time.perf_counter() - start
    if ctx.config.get("severity") == "warn":
        _soften(result)
    return result


def _soften(result: CheckResult) -> None:
    """The profile asks for warnings only from this check."""
    for finding in result.findings:
        if finding.status == Status.FAIL:
            finding.status = Status.WARN
    if result.status == Status.FAIL:
        result.status = Status.WARN


def run_checks(
    profile: Profile,
    options: RunOptions,
    system: System | None = None,
    only: Iterable[str] | None = None,
    on_start: Callable[[CheckSpec], None] | None = None,
    checks: Mapping[str, CheckSpec] | None = None,
) -> RunOutcome:
    if checks is None:
        from hostcheck.registry import CHECKS as checks
    system = system or System()
    wanted = set(only) if only else None
    results = []
    started = time.time()
    clock = time.perf_counter()
    for check_id, spec in checks.items():
        if wanted is not None and check_id not in wanted:
            continue
        if not profile.enabled(check_id):
            results.append(CheckResult.skipped(check_id, f"disabled in profile {profile.name}"))
            continue
        if on_start:
            on_start(spec)
        ctx = CheckContext(
            system=system,
            config=profile.section(check_id),
            options=options,
            require_gpu=options.require_gpu or profile.require_gpu,
        )
        results.append(run_one(spec, ctx))
    return outcome_of(results, started, profile, options, time.perf_counter() - clock)


def outcome_of(
    results: list[CheckResult],
    started_at: float,
    profile: Profile,
    options: RunOptions,
    duration_s: float | None = None,
) -> RunOutcome:
    """The outcome of these results; the duration runs until now unless given."""
    outcome = RunOutcome(
        results=results,
        started_at=started_at,
        duration_s=time.time() - started_at if duration_s is None else duration_s,
        profile=profile,
        options=options,
    )
    for status in Status:
        outcome.counts[status.value] = sum(r.status == status for r in results)
    return outcome
