"""The playbooks and roles pass Ansible's own syntax check and ansible-lint's production profile."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.paths import BIN
from tests.paths import CHECKOUT as REPO

# Out of the gate unless what it reads changed (tests/selection.py): ansible-lint alone takes
# 15-20 CPU-seconds, and a change to the docs or to hostcheck's Python gives it nothing new to
# read. It reads the YAML outside tests/, the roles, the collection's plugins and metadata; the
# platform test below reads the sandbox's OS kinds.
READS = (
    "*.yml",
    "*.yaml",
    ".ansible-lint",
    "roles/*",
    "plugins/*",
    "meta/*",
    "inventory/*",
    "tests/sandbox/oskinds.py",
)

ENV = {
    **os.environ,
    "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    "PATH": f"{BIN}:{os.environ['PATH']}",
}
PLAYBOOKS = [
    "site.yml",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "playbooks").glob("*.yml")),
]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook):
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "inventory/hosts.yml", playbook],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ansible_lint_production_profile():
    done = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in done.stderr + done.stdout


# Ansible's names for the releases of each sandbox OS kind (tests/sandbox/oskinds.py).
PLATFORM_OF_KIND = {
    "debian12": ("Debian", "bookworm"),
    "debian13": ("Debian", "trixie"),
    "ubuntu2204": ("Ubuntu", "jammy"),
    "ubuntu2404": ("Ubuntu", "noble"),
    "rocky8": ("EL", "8"),
    "rocky9": ("EL", "9"),
}


@pytest.mark.parametrize("role", sorted(p.name for p in (REPO / "roles").iterdir()))
def test_roles_claim_exactly_the_platforms_the_sandbox_matrix_runs(role):
    import yaml

    from tests.sandbox.oskinds import KINDS

    meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text())
    claimed = {
        (platform["name"], str(version))
        for platform in meta["galaxy_info"]["platforms"]
        for version in platform["versions"]
    }
    assert claimed == {PLATFORM_OF_KIND[kind] for kind in KINDS}
