"""Root never runs what a user can change: with the hostcheck timer or Slurm's health check
on, the roles refuse a training venv others can write, by name and before any change, on a
sandbox host with a real user owning real files. Switched off, or once the venv is root's
alone, they let it be."""

from __future__ import annotations

import pytest

from tests.integration.ansible import run_playbook

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "plugins/modules/root_may_run.py",
    "plugins/module_utils/root_trust.py",
    "hostcheck/root_runs.py",
    "roles/hostcheck/tasks/validate.yml",
    "roles/slurm_healthcheck/tasks/validate.yml",
    "roles/slurm_healthcheck/tasks/refusals.yml",
    "tests/integration/playbooks/validate_all.yml",
)

pytestmark = pytest.mark.integration
VALIDATE_ALL = "tests/integration/playbooks/validate_all.yml"
TOP = "/srv/trust"
VENV = f"{TOP}/train"
BOTH_ON = {
    "hostcheck_venv": VENV,
    "hostcheck_timer_enabled": True,
    "slurm_healthcheck_enabled": True,
}


@pytest.fixture(scope="module")
def host(fleet, hosts):
    host = next(h for h in hosts if h.os == "debian12")
    done = fleet.ssh(
        host,
        f"id trainer >/dev/null 2>&1 || useradd --create-home trainer; rm -rf {TOP};"
        f" mkdir -p {VENV}/bin {VENV}/lib/python3.11/site-packages/hostcheck && chmod 755 {TOP}"
        f" && printf 'home = /usr/bin\\n' > {VENV}/pyvenv.cfg"
        f" && ln -s /usr/bin/python3 {VENV}/bin/python"
        f" && printf '#!{VENV}/bin/python\\n' > {VENV}/bin/hostcheck"
        f" && chmod 755 {VENV}/bin/hostcheck"
        f" && touch {VENV}/lib/python3.11/site-packages/hostcheck/__init__.py",
    )
    assert done.returncode == 0, done.stderr
    yield host
    fleet.ssh(host, f"rm -rf {TOP}; userdel -r trainer")


def refusals(run, host) -> list[str]:
    return [m for m in run.messages(host.name) if "as root, and others can change" in m]


def test_a_venv_a_user_owns_is_refused_by_both_roles_before_any_change(fleet, host):
    assert fleet.ssh(host, f"chown -R trainer:trainer {VENV}").returncode == 0
    each = run_playbook(fleet, VALIDATE_ALL, BOTH_ON, limit=host.name)
    hostcheck, slurm = refusals(each, host)
    assert hostcheck.startswith(
        f"hostcheck_venv: the hostcheck timer would run {VENV}/bin/hostcheck as root, and others "
        f"can change what it runs: {VENV} is owned by trainer (and "
    ), hostcheck
    assert hostcheck.endswith("or set hostcheck_timer_enabled: false"), hostcheck
    assert slurm.startswith(
        f"slurm_healthcheck_hostcheck: Slurm's health check would run {VENV}/bin/hostcheck as "
        f"root, and others can change what it runs: {VENV} is owned by trainer"
    ), slurm
    assert each.changed(host.name) == 0

    site = run_playbook(fleet, "site.yml", BOTH_ON, limit=host.name)
    assert site.returncode != 0
    assert refusals(site, host)[:1] == [hostcheck]
    assert site.changed(host.name) == 0, site.changed_tasks(host.name)
    timer = fleet.ssh(host, "ls /etc/systemd/system/hostcheck.timer")
    assert timer.returncode != 0, "the timer was installed although the venv was refused"


def test_switched_off_the_venv_is_left_to_its_users(fleet, host):
    assert fleet.ssh(host, f"chown -R trainer:trainer {VENV}").returncode == 0
    each = run_playbook(fleet, VALIDATE_ALL, {"hostcheck_venv": VENV}, limit=host.name)
    assert refusals(each, host) == []


def test_a_venv_root_alone_can_change_passes(fleet, host):
    made_safe = fleet.ssh(host, f"chown -R root:root {VENV} && chmod -R go-w {VENV}")
    assert made_safe.returncode == 0
    each = run_playbook(fleet, VALIDATE_ALL, BOTH_ON, limit=host.name)
    assert refusals(each, host) == []
    one_file = f"{VENV}/lib/python3.11/site-packages/hostcheck/__init__.py"
    assert fleet.ssh(host, f"chmod o+w {one_file}").returncode == 0
    each = run_playbook(fleet, VALIDATE_ALL, BOTH_ON, limit=host.name)
    assert [m.split(": ")[0] for m in refusals(each, host)] == [
        "hostcheck_venv",
        "slurm_healthcheck_hostcheck",
    ]
    assert all(f"{one_file} is writable by everyone" in m for m in refusals(each, host))


def test_a_venv_to_be_made_in_a_folder_a_group_can_write_is_refused(fleet, host):
    assert fleet.ssh(host, f"chown root:staff {TOP} && chmod 775 {TOP}").returncode == 0
    later = {**BOTH_ON, "hostcheck_venv": f"{TOP}/new"}
    each = run_playbook(fleet, VALIDATE_ALL, later, limit=host.name)
    (hostcheck, slurm) = refusals(each, host)
    assert f"others can change what it runs: {TOP} is writable by group staff" in hostcheck
    assert f"{TOP} is writable by group staff" in slurm
    assert fleet.ssh(host, f"test -e {TOP}/new").returncode != 0
    fleet.ssh(host, f"chown root:root {TOP} && chmod 755 {TOP}")
