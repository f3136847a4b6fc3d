"""The sandbox's OS kinds as `make sandbox-up OS=...` names them, and the roles' supported-OS
check (plugins/plugin_utils/platforms.py) on the facts Ansible gathers."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.platforms import (
    platform_of,
    problem,
)

from tests.paths import CHECKOUT as REPO
from tests.sandbox import oskinds

PLATFORMS = [
    {"name": "Debian", "versions": ["bookworm", "trixie"]},
    {"name": "Ubuntu", "versions": ["jammy", "noble"]},
    {"name": "EL", "versions": ["8", "9"]},
]


def test_kinds_are_taken_in_turn_and_default_to_debian12():
    kinds = oskinds.parse("debian12, rocky9")
    assert [k.name for k in kinds] == ["debian12", "rocky9"]
    assert [k.name for k in oskinds.for_hosts(3, kinds)] == ["debian12", "rocky9", "debian12"]
    assert {k.name for k in oskinds.for_hosts(2)} == {"debian12"}
    assert oskinds.KINDS["rocky8"].python == "/usr/bin/python3.11"
    assert [oskinds.KINDS[name].name for name in oskinds.DEFAULT_MIX[:3]] == [
        "debian12",
        "ubuntu2404",
        "rocky9",
    ]


@pytest.mark.parametrize("text", ["centos7", "debian12,ubuntu1804", ""])
def test_an_unknown_kind_is_refused_with_the_list_of_kinds(text):
    with pytest.raises(ValueError) as refused:
        oskinds.parse(text)
    assert "debian12, debian13, ubuntu2204, ubuntu2404, rocky8, rocky9" in str(refused.value)


def test_sandbox_up_refuses_an_unknown_kind_before_anything_starts():
    done = subprocess.run(
        [sys.executable, "-m", "tests.sandbox", "--instance", "refused", "up", "--os", "centos7"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown OS kind 'centos7'; the kinds are: debian12, debian13" in done.stderr
    assert not (REPO / ".cache" / "sandbox" / "fleet-refused").exists()


@pytest.mark.parametrize(
    ("facts", "platform", "supported"),
    [
        ({"distribution": "Debian", "distribution_release": "trixie"}, ("Debian", "trixie"), 1),
        ({"distribution": "Ubuntu", "distribution_release": "noble"}, ("Ubuntu", "noble"), 1),
        ({"distribution": "Ubuntu", "distribution_release": "bionic"}, ("Ubuntu", "bionic"), 0),
        ({"distribution": "Rocky", "distribution_major_version": "9"}, ("EL", "9"), 1),
        ({"distribution": "RedHat", "distribution_major_version": "8"}, ("EL", "8"), 1),
        ({"distribution": "CentOS", "distribution_major_version": "7"}, ("EL", "7"), 0),
        ({"distribution": "Plan9", "distribution_major_version": "4"}, ("Plan9", "4"), 0),
    ],
)
def test_the_platform_check_maps_facts_to_galaxy_platforms(facts, platform, supported):
    assert platform_of(facts) == platform
    assert (problem(facts, PLATFORMS, "shm") == "") == bool(supported)


def test_the_refusal_names_the_os_the_role_and_what_is_supported():
    facts = {
        "distribution": "CentOS",
        "distribution_major_version": "7",
        "distribution_version": "7.9",
    }
    assert problem(facts, PLATFORMS, "ulimits") == (
        "ulimits: CentOS 7.9 is not supported; the role runs on Debian bookworm, trixie; "
        "Ubuntu jammy, noble; EL 8, 9 (set ulimits_enabled: false for this host to leave it alone)"
    )
