"""What a repair can do about a host's failing checks, read from its report: the roles whose
variables fix a cause (named in its remedy), a reboot for what a GPU reset or a reboot clears,
a person for the rest; and a cause repaired before within the window goes to a person too.
`hostcheck repair plan` prints it for playbooks/repair.yml; `hostcheck repair record` keeps a
repair in the health check's history (state.json), which the window is read from."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

from hostcheck.health.state import stamp
from hostcheck.health.verdict import cause_keys
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.remedies import ROLES, role_variables

ROLE, REBOOT, PERSON = "role", "reboot", "person"


@dataclass
class Cause:
    key: str  # check.finding, as the health check's history names it
    shown: str  # the finding as the report shows it
    remedy: str
    fix: str  # ROLE, REBOOT or PERSON
    roles: list[str] = field(default_factory=list)  # with ROLE: the roles whose variables fix it
    repaired_before: str = ""  # when it was repaired within the window: then a person decides


@dataclass
class Plan:
    causes: list[Cause] = field(default_factory=list)

    @property
    def roles(self) -> list[str]:
        """The roles to run, once each, in the order the causes name them."""
        wanted = [
            r for c in self.causes if c.fix == ROLE and not c.repaired_before for r in c.roles
        ]
        return list(dict.fromkeys(wanted))

    @property
    def reboot(self) -> bool:
        return any(c.fix == REBOOT and not c.repaired_before for c in self.causes)

    @property
    def for_a_person(self) -> list[Cause]:
        return [c for c in self.causes if c.fix == PERSON or c.repaired_before]

    def to_dict(self) -> dict:
        return {
            "roles": self.roles,
            "reboot": self.reboot,
            "for_a_person": [c.key for c in self.for_a_person],
            "causes": [asdict(c) for c in self.causes],
        }


def roles_of(remedy: str) -> list[str]:
    """The roles whose variables a remedy names (shm_size: shm), in order, once each."""
    roles = []
    for variable in role_variables(remedy):
        role = max((r for r in ROLES if variable.startswith(r + "_")), key=len)
        roles.append(role)
    return list(dict.fromkeys(roles))


def _shown(finding: Finding) -> str:
    return f"{finding.name} {finding.display or finding.measured}"


def _checks(report: dict) -> list[CheckResult]:
    return [CheckResult.from_dict(data) for data in report.get("checks") or []]


def failing_causes(report: dict) -> list[str]:
    """The causes a report fails for, check.finding as the health check's history names them."""
    return [key for c in _checks(report) if c.status == Status.FAIL for key in cause_keys(c)]


def after(report: dict, keys: list[str]) -> dict[str, str]:
    """What a report shows of these causes ("pass: size 64.0 MiB"), then of the causes it fails
    for besides: a host's values after a repair."""
    checks = {check.id: check for check in _checks(report)}
    shown: dict[str, str] = {}
    for key in keys:
        check_id, _, name = key.partition(".")
        check = checks.get(check_id)
        finding = next((f for f in check.findings if f.name == name), None) if check else None
        if finding is not None:
            shown[key] = f"{finding.status.value}: {_shown(finding)}"
        else:
            shown[key] = f"{check.status.value}: {check.summary}" if check else "not run"
    for check in checks.values():
        if check.status != Status.FAIL:
            continue
        by_key = {f"{check.id}.{f.name}": f for f in check.findings}
        for key in cause_keys(check):
            if key not in shown:
                finding = by_key.get(key)
                shown[key] = f"fail: {_shown(finding) if finding else check.summary}"
    return shown


def _cause(check: CheckResult, key: str, finding: Finding | None) -> Cause:
    remedy = (finding.remedy if finding else "") or check.remedy
    shown = _shown(finding) if finding else check.summary
    if finding is not None and finding.cleared_by:
        return Cause(key, shown, remedy, REBOOT)
    roles = roles_of(remedy)
    return Cause(key, shown, remedy, ROLE if roles else PERSON, roles)


def plan(report: dict, history: list[dict], now: dt.datetime, window_days: float) -> Plan:
    """The plan for a host from its report (hostcheck run's JSON) and the health check's
    history (state.json, its entries checked by state.recorded's reader): one cause per
    failing finding of each failing check."""
    since = stamp(now - dt.timedelta(days=window_days))
    repaired: dict[str, str] = {}
    for entry in history:
        if entry.get("action") == "repaired" and str(entry.get("at")) >= since:
            repaired.update(dict.fromkeys(entry.get("causes") or [], entry["at"]))
    found = Plan()
    for check in _checks(report):
        if check.status != Status.FAIL:
            continue
        failing = {f"{check.id}.{f.name}": f for f in check.findings if f.status == Status.FAIL}
        for key in cause_keys(check):
            cause = _cause(check, key, failing.get(key))
            cause.repaired_before = repaired.get(key, "")
            found.causes.append(cause)
    return found
