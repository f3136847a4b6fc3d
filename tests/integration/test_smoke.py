"""The gate's smoke converge: site.yml on one fresh Debian 12 sandbox host, from this checkout.
It converges, a second run changes nothing, playbooks/verify.yml alone passes on the result,
and hostcheck (installed by the hostcheck role) passes there. Every change runs it (make test).
It is also the OS matrix's Debian 12 host: Ansible gathers it as Debian 12, and fresh SSH
sessions see what site.yml set, as test_os_matrix.py asks of the other kinds
(tests/integration/site_checks.py); the oldest ansible-core and the collection as a user
installs it are test_os_matrix.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.ansible import run_playbook
from tests.integration.site_checks import (
    FACTS,
    assert_build_packages_went_in_under_the_distributions_names,
    assert_fresh_sessions_see_what_site_yml_set,
    assert_services_get_the_limits_and_no_unit_failed,
    gathered_as,
)
from tests.paths import CHECKOUT

# What this module covers (tests/selection.py); the gate runs it whatever changed.
COVERS = (
    "site.yml",
    "playbooks/site.yml",
    "playbooks/provision.yml",
    "playbooks/tasks/group_roles.yml",
    "playbooks/tasks/validate_roles.yml",
    "plugins/action/role_switch.py",
    "plugins/modules/role_switch.py",
    "playbooks/verify.yml",
    "roles/*/tasks/main.yml",
    "tests/integration/site_checks.py",
)

pytestmark = pytest.mark.integration
ANSIBLE_FIRST_LOGIN = "Module remote_tmp /root/.ansible/tmp did not exist and was created"
VENV = "/opt/venvs/train"


@pytest.fixture(scope="module")
def converged(make_fleet):
    fleet = make_fleet("smoke", hosts=1, os_kinds="debian12")
    first = run_playbook(fleet, "site.yml")
    (host,) = fleet.hosts()
    assert first.returncode == 0, first.failure_text(host.name)
    return fleet, host, first


def test_site_yml_converges_a_fresh_debian_12_host(converged):
    fleet, host, first = converged
    assert first.stats[host.name]["failures"] == 0
    assert first.changed(host.name) > 10, first.changed_tasks(host.name)
    release = fleet.ssh(host, ". /etc/os-release; echo $ID $VERSION_ID").stdout.split()
    assert release == ["debian", "12"]
    assert gathered_as(fleet) == {"debian12": FACTS["debian12"]}
    assert "    os_debian12:" in Path(fleet.inventory).read_text()  # a group per OS kind
    # No warning from the collection's own tasks (a reset_connection under a condition was one).
    # The one left is ansible-core's on the host's first login, which every new host shows.
    warnings = [line for line in first.stderr.splitlines() if line.startswith("[WARNING]")]
    assert all(ANSIBLE_FIRST_LOGIN in line for line in warnings), warnings


def test_fresh_sessions_see_what_site_yml_set(converged):
    fleet, host, _ = converged
    assert_fresh_sessions_see_what_site_yml_set(fleet, host)
    assert_build_packages_went_in_under_the_distributions_names(fleet, host)
    assert_services_get_the_limits_and_no_unit_failed(fleet, host)


def tasks_run(run, host: str) -> list[str]:
    """The names of the tasks that ran on the host, skipped ones too, in order."""
    return [
        task["task"]["name"].removeprefix("hostcheck.gpu_hosts.")
        for play in run.output["plays"]
        for task in play["tasks"]
        if host in task["hosts"]
    ]


def test_a_second_run_changes_nothing(converged):
    """The no-op: nothing changes, in at most 45 tasks (issue 44's goal; 68 at ff244ef)."""
    fleet, host, _ = converged
    second = run_playbook(fleet, "site.yml")
    assert second.returncode == 0, second.failure_text(host.name)
    assert second.changed(host.name) == 0, second.changed_tasks(host.name)
    assert len(tasks_run(second, host.name)) <= 45, tasks_run(second, host.name)


def test_roles_switched_off_cost_a_host_no_task_of_theirs(converged):
    """Every role switched off: the host is grouped off for each (one task) and runs no task of
    any role, not even a skipped one; nothing changes."""
    fleet, host, _ = converged
    specs = CHECKOUT.glob("roles/*/meta/argument_specs.yml")
    roles = sorted(path.parts[-3] for path in specs)
    off = run_playbook(fleet, "site.yml", extra_vars={f"{role}_enabled": False for role in roles})
    assert off.returncode == 0, off.failure_text(host.name)
    assert off.changed(host.name) == 0, off.changed_tasks(host.name)
    grouped = off.task_results("Group the hosts by the roles that are on")[host.name]["results"]
    assert {item["item"]: item["add_group"] for item in grouped} == {
        role: f"{role}_off" for role in roles
    }
    assert tasks_run(off, host.name) == [
        "Refuse a full file system the roles write to",
        "Read the host's distribution, package manager and kernel",
        "Group the hosts by the roles that are on",
    ]


def test_verify_yml_alone_passes_on_the_converged_host(converged):
    fleet, host, _ = converged
    verified = run_playbook(fleet, "playbooks/verify.yml")
    assert verified.returncode == 0, verified.failure_text(host.name)
    stats = verified.stats[host.name]
    assert stats["failures"] == 0 and stats["changed"] == 0
    assert stats["ok"] >= 9, stats  # one verification a role at least


def test_hostcheck_passes_on_the_converged_host(converged):
    fleet, host, _ = converged
    check = fleet.ssh(host, f"{VENV}/bin/hostcheck run --config /etc/hostcheck/config.yaml")
    assert check.returncode == 0, check.stdout[-3000:]
    report = json.loads(fleet.ssh(host, "cat /var/lib/hostcheck/report.json").stdout)
    assert report["schema_version"] == 1 and report["exit_code"] == 0
    statuses = {check["id"]: check["status"] for check in report["checks"]}
    assert statuses["shm"] == "pass" and statuses["ulimits"] == "pass", statuses
