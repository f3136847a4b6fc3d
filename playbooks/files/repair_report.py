"""The report of one run of playbooks/repair.yml: every host's outcome, as JSON and a table.

    python repair_report.py FOLDER < outcomes.json

Standard input: {"<host>": outcome}, the facts the play recorded for each host it considered:
{"skipped": why} for a host it left alone, the repair's facts (plan, before and after, Slurm's
node) for a host it repaired, {} for one where the play stopped (unreachable, a task failed).
Writes FOLDER/repair-<UTC stamp>.json (to a temporary name, then renamed) and prints a table
and the file's path on standard output. Exit 0 when no host needs a person, 1 when one does
(their names and why on standard error), 2 with a line on standard error for bad input.
Standard library only, run by the controller's Python.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile

KIND = "hostcheck-repair"
FOR_A_PERSON, FAILED = "for a person", "failed"
NEEDS_A_PERSON = (FOR_A_PERSON, FAILED)
STOPPED = (
    "the repair stopped on this host before it had an outcome (unreachable, or a task failed: "
    "see the play's output)"
)


def _roles_said(outcome: dict) -> str:
    roles = outcome.get("roles") or []
    return f"role{'s' if len(roles) > 1 else ''} {', '.join(roles)}" if roles else "no role"


def _why_a_person(outcome: dict) -> str:
    causes = {c["key"]: c for c in outcome.get("causes") or []}
    whys = []
    for key in outcome.get("for_a_person") or []:
        cause = causes.get(key, {})
        if cause.get("repaired_before"):
            whys.append(
                f"{key} came back: repaired at {cause['repaired_before']}, within the window"
            )
        else:
            remedy = cause.get("remedy") or ""
            if not remedy.startswith("not fixable by a role"):
                remedy = "no role fixes it" + (f": {remedy}" if remedy else "")
            whys.append(f"{key} ({cause.get('shown', '')}): {remedy}")
    return "; ".join(whys)


def _reboot_causes(outcome: dict) -> str:
    return ", ".join(c["key"] for c in outcome.get("causes") or [] if c.get("fix") == "reboot")


def _yes(value: object) -> bool:
    """A fact the play recorded as a boolean (Ansible may hand it over as text)."""
    return value is True or str(value).lower() == "true"


def _back_in_service(outcome: dict) -> str:
    """How the node went back to Slurm after this run's check: '' when it did not."""
    if _yes(outcome.get("resumed")):
        return "resumed"
    if _yes(outcome.get("was_drained_by_hostcheck")) and not _yes(outcome.get("drained_now")):
        return "the health check resumed it first"
    return ""


def decide(outcome: dict) -> tuple[str, str]:
    """The host's action and why, in a few words."""
    if outcome.get("skipped"):
        return "skipped", outcome["skipped"]
    if outcome.get("action") == FAILED:
        return FAILED, outcome.get("said") or STOPPED
    if "causes" not in outcome:
        return FAILED, STOPPED
    check_mode = _yes(outcome.get("check_mode"))
    resumable = _yes(outcome.get("was_drained_by_hostcheck"))
    back = _back_in_service(outcome)
    if _yes(outcome.get("passed_before")):
        if check_mode and resumable:
            return "would resume", "passes (check mode: nothing changed)"
        return ("resumed", f"passes; {back}") if back else ("nothing to do", "passes")
    if outcome.get("for_a_person"):
        return FOR_A_PERSON, _why_a_person(outcome)
    if check_mode:
        steps = [f"run {_roles_said(outcome)}"] if outcome.get("roles") else []
        if _yes(outcome.get("reboot")):
            steps.append(f"ask Slurm to reboot it ({_reboot_causes(outcome)})")
        steps.append("check it again" + (", resume it if it passes" if resumable else ""))
        return "would repair", "; ".join(steps) + " (check mode: nothing changed)"
    if outcome.get("failed"):
        return FOR_A_PERSON, f"the repair failed: {outcome['failed']}"
    if _yes(outcome.get("rebooting")):
        return "rebooting", (
            f"{_roles_said(outcome)} run; Slurm reboots it ({_reboot_causes(outcome)}) and "
            "resumes it after"
        )
    if _yes(outcome.get("reboot")):
        why = outcome.get("reboot_why") or "no Slurm to ask"
        return FOR_A_PERSON, f"needs a reboot ({_reboot_causes(outcome)}): {why}"
    if _yes(outcome.get("passes")):
        done = f"{_roles_said(outcome)} run; hostcheck passes"
        if back:
            return "repaired and resumed", f"{done}; {back}"
        if _yes(outcome.get("drained_by_someone_else")):
            return "repaired", f"{done}; left drained by someone else"
        return "repaired", done
    still = "; ".join(f"{k}: {v}" for k, v in (outcome.get("after") or {}).items())
    return FOR_A_PERSON, f"still failing after {_roles_said(outcome)}: {still}"


def entry(host: str, outcome: dict) -> dict:
    action, said = decide(outcome)
    return {
        "host": host,
        "node": outcome.get("node", ""),
        "action": action,
        "said": " ".join(said.split()),
        "roles": outcome.get("roles") or [],
        "causes": outcome.get("causes") or [],
        "before": outcome.get("before") or {},
        "after": outcome.get("after") or {},
    }


def table(entries: list[dict]) -> str:
    width = max([len("host")] + [len(e["host"]) for e in entries])
    action_width = max([len("action")] + [len(e["action"]) for e in entries])
    lines = [f"{'host':<{width}}  {'action':<{action_width}}  why"]
    for e in entries:
        values = ", ".join(
            f"{key}: {shown}"
            + (f" -> {e['after'][key]}" if e["after"].get(key, shown) != shown else "")
            for key, shown in e["before"].items()
        )
        why = e["said"] + (f" [{values}]" if values and e["action"] != "skipped" else "")
        lines.append(f"{e['host']:<{width}}  {e['action']:<{action_width}}  {why}")
    return "\n".join(lines)


def write(folder: str, document: dict, stamp: str) -> str:
    """FOLDER/repair-STAMP.json, or repair-STAMP-N.json when a run this second has one."""
    os.makedirs(folder, exist_ok=True)
    path, n = os.path.join(folder, f"repair-{stamp}.json"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(folder, f"repair-{stamp}-{n}.json")
    handle, temporary = tempfile.mkstemp(prefix=".repair-", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: repair_report.py FOLDER < outcomes.json", file=sys.stderr)
        return 2
    try:
        outcomes = json.load(sys.stdin)
    except ValueError as exc:
        print(f"repair_report.py: standard input is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(outcomes, dict) or not all(isinstance(v, dict) for v in outcomes.values()):
        print("repair_report.py: standard input: not {host: outcome}", file=sys.stderr)
        return 2
    now = dt.datetime.now(dt.timezone.utc)
    entries = [entry(host, outcomes[host]) for host in sorted(outcomes)]
    counts: dict[str, int] = {}
    for e in entries:
        counts[e["action"]] = counts.get(e["action"], 0) + 1
    people = [e for e in entries if e["action"] in NEEDS_A_PERSON]
    document = {
        "kind": KIND,
        "at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "counts": counts,
        "needs_a_person": [e["host"] for e in people],
        "hosts": entries,
    }
    path = write(argv[1], document, now.strftime("%Y%m%dT%H%M%SZ"))
    print(table(entries) if entries else "no host considered")
    print(f"report: {path}")
    if people:
        names = "; ".join(f"{e['host']} ({e['said']})" for e in people)
        print(f"repair: {len(people)} host(s) need a person: {names}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
