"""Validation cases batched: many bad-input cases in one ansible-playbook run on one sandbox
host, instead of one run (or one host) per case.

Each case is an inventory alias of the same host: its own inventory name, the host's address,
port and host variables, and the case's variables as host variables (above the sandbox's
group_vars, below a play's vars; the tests' playbooks set none that a case names). Ansible runs
every alias as a host of its own, so each case is validated, fails and is reported on its own
(`run.messages(case)`, `run.changed(case)`), while SSH proves once for all of them that nothing
changed on the one machine they share."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.integration.ansible import PlaybookRun, run_playbook
from tests.sandbox.fleet import Fleet, Host


def case_inventory(fleet: Fleet, host: Host, cases: dict[str, dict]) -> Path:
    """An inventory beside the fleet's (so its group_vars apply) whose gpu_nodes are the cases,
    each an alias of host with the case's variables."""
    inventory = yaml.safe_load(Path(fleet.inventory).read_text())
    real = inventory["all"]["children"]["gpu_nodes"]["hosts"][host.name]
    aliases = {case: {**real, **variables} for case, variables in cases.items()}
    children = {"gpu_nodes": {"hosts": aliases}, f"os_{host.os}": {"hosts": dict.fromkeys(cases)}}
    document = {"all": {"vars": inventory["all"]["vars"], "children": children}}
    path = Path(fleet.inventory).with_name("cases.yml")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run_cases(
    fleet: Fleet, host: Host, playbook: str, cases: dict[str, dict], common: dict | None = None
) -> PlaybookRun:
    """One run of playbook over every case (case name: its variables; common: what every case
    has beneath its own)."""
    merged = {case: {**(common or {}), **variables} for case, variables in cases.items()}
    return run_playbook(fleet, playbook, inventory=case_inventory(fleet, host, merged))


def case_failures(run: PlaybookRun, case: str) -> str:
    """Every failure message of one case, loop items included; not the run's stderr, which
    all cases share."""
    return run.failure_text(case).removesuffix(run.stderr)


def case_name(index: int) -> str:
    """The inventory name of the index-th case."""
    return f"case{index:02d}"


def cases_of(rows) -> dict[str, dict]:
    """Cases from parametrize rows whose first element is the case's variables."""
    return {case_name(index): row[0] for index, row in enumerate(rows)}


def refusal(run: PlaybookRun, index: int) -> str:
    """The index-th case's failure messages, once it is plain that the case failed and changed
    nothing."""
    case = case_name(index)
    assert run.returncode != 0
    assert case in run.failed_hosts(), f"{case} did not fail"
    assert run.changed(case) == 0, run.changed_tasks(case)
    return case_failures(run, case)
