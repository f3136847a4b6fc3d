"""site.yml --check --diff on fresh sandbox hosts: completes, and changes nothing."""

from __future__ import annotations

import pytest

from tests.integration.ansible import run_playbook
from tests.integration.site_checks import VENV, sh

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "site.yml",
    "playbooks/site.yml",
    "playbooks/provision.yml",
    "playbooks/verify.yml",
    "roles/*/handlers/*",
    "tests/integration/site_checks.py",
)

pytestmark = pytest.mark.integration
MiB = 2**20


def test_check_diff_on_fresh_hosts(make_fleet):
    fresh = make_fleet("site-check", hosts=2)
    run = run_playbook(fresh, "site.yml", check=True, diff=True)
    assert run.returncode == 0, [(h, run.messages(h)) for h in run.failed_hosts()]
    for host in fresh.hosts():
        assert int(sh(fresh, host, "df -B1 --output=size /dev/shm | tail -1")) == 64 * MiB
        assert fresh.ssh(host, f"test -e {VENV}").returncode == 1
