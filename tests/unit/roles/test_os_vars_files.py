"""Each role's per-OS vars files against the platforms it supports (meta/main.yml): every file
is the one the role's include_vars task (tasks/validate.yml, first_found) loads on some
supported host, and every supported host gets one in the roles that cannot run without."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.support import os_vars
from tests.support.os_vars import candidates, include_vars_task, platform_facts, vars_file_for

ROLES_WITH_OS_VARS = sorted(
    {
        path.parent.parent.name
        for path in os_vars.ROLES.glob("*/vars/*.yml")
        if path.name != "main.yml"
    }
)
# the validate actions that call os_vars(required=True): no vars file, no run
REQUIRED = {"dataset_staging", "nvidia_driver", "sysctl_tuning"}


def supported_hosts(role: str) -> list[dict]:
    meta = yaml.safe_load((os_vars.ROLES / role / "meta" / "main.yml").read_text())
    return platform_facts(meta["galaxy_info"]["platforms"])


def unreachable(role: str) -> list[str]:
    """The role's per-OS vars files that no supported host loads."""
    reached = {vars_file_for(role, facts) for facts in supported_hosts(role)}
    files = {p for p in (os_vars.ROLES / role / "vars").glob("*.yml") if p.name != "main.yml"}
    return sorted(p.name for p in files - reached)


def test_the_roles_with_per_os_vars():
    assert ROLES_WITH_OS_VARS == [
        "cuda_check",
        "dataset_staging",
        "hostcheck",
        "nvidia_driver",
        "pillow_simd",
        "sysctl_tuning",
        "ulimits",
    ]


@pytest.mark.parametrize("role", ROLES_WITH_OS_VARS)
def test_every_vars_file_is_loaded_on_some_supported_host(role):
    assert unreachable(role) == [], f"{role}: no supported platform loads these"


@pytest.mark.parametrize("role", sorted(REQUIRED))
def test_every_supported_host_gets_a_vars_file(role):
    for facts in supported_hosts(role):
        assert vars_file_for(role, facts) is not None, (role, facts)


@pytest.mark.parametrize("role", ROLES_WITH_OS_VARS)
def test_the_task_loads_the_most_specific_file_into_the_roles_variable(role):
    task = include_vars_task(role)
    assert task["ansible.builtin.include_vars"] == {
        "file": "{{ item }}",
        "name": f"__{role}_os_vars_loaded",
    }
    assert task["when"] == f"{role}_enabled | bool"
    assert task["with_first_found"][0]["skip"] is True
    host = {"distribution": "Rocky", "distribution_major_version": "9", "os_family": "RedHat"}
    assert candidates(role, host) == ["Rocky-9.yml", "Rocky.yml", "RedHat-9.yml", "RedHat.yml"]


def test_a_planted_vars_file_for_an_os_no_platform_names_is_reported(tmp_path, monkeypatch):
    """The check above can fail: nvidia_driver's former CentOS-7.yml, put back in a copy of
    the roles, is loaded on no supported host (EL 7 is refused by the platform check)."""
    roles = tmp_path / "roles"
    shutil.copytree(os_vars.ROLES / "nvidia_driver", roles / "nvidia_driver")
    (roles / "nvidia_driver" / "vars" / "CentOS-7.yml").write_text("__nvidia_driver_table: {}\n")
    monkeypatch.setattr(os_vars, "ROLES", roles)
    assert unreachable("nvidia_driver") == ["CentOS-7.yml"]
