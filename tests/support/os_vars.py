"""Which of a role's per-OS vars files Ansible loads on a host: the file names of the
include_vars task (with_first_found) in the role's tasks/validate.yml, rendered with the
host's facts, the first that exists. The tests read the task itself, so the order they check
is the one the role runs."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

from tests.paths import CHECKOUT

ROLES = CHECKOUT / "roles"
JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined)
# Galaxy's platform names (meta/main.yml) as Ansible's facts call such a host
DEBIAN_MAJOR = {"bookworm": "12", "trixie": "13"}
UBUNTU_MAJOR = {"jammy": "22", "noble": "24"}
EL_DISTRIBUTIONS = ("RedHat", "Rocky", "AlmaLinux", "CentOS", "OracleLinux")
# the two tasks each role's files run before validating, as a run's results name them
READ_FACTS_TASK = "Read the host's distribution, package manager and kernel (unless the play did)"
LOAD_OS_VARS_TASK = (
    "Load this OS's variables (its first vars file there is, as first_found orders them)"
)


def include_vars_task(role: str) -> dict | None:
    """The include_vars task of roles/<role>/tasks/validate.yml, None when it has none."""
    tasks = yaml.safe_load((ROLES / role / "tasks" / "validate.yml").read_text())
    found = [task for task in tasks if "ansible.builtin.include_vars" in task]
    assert len(found) <= 1, f"{role}: {len(found)} include_vars tasks in validate.yml"
    return found[0] if found else None


def candidates(role: str, facts: dict) -> list[str]:
    """The vars file names the task tries for a host with these facts, in its order."""
    task = include_vars_task(role)
    assert task is not None, f"{role}: no include_vars task in tasks/validate.yml"
    (terms,) = task["with_first_found"]
    return [JINJA.from_string(name).render(ansible_facts=facts) for name in terms["files"]]


def vars_file_for(role: str, facts: dict) -> Path | None:
    for name in candidates(role, facts):
        path = ROLES / role / "vars" / name
        if path.is_file():
            return path
    return None


def loaded(role: str, facts: dict) -> dict | None:
    """What the task puts into __<role>_os_vars_loaded on such a host (None: no file)."""
    path = vars_file_for(role, facts)
    return None if path is None else yaml.safe_load(path.read_text()) or {}


def platform_facts(platforms: list[dict]) -> list[dict]:
    """The facts of every host a role's galaxy_info.platforms supports."""
    hosts = []
    for platform in platforms:
        for version in map(str, platform["versions"]):
            if platform["name"] == "Debian":
                hosts.append(facts("Debian", DEBIAN_MAJOR[version], "Debian"))
            elif platform["name"] == "Ubuntu":
                hosts.append(facts("Ubuntu", UBUNTU_MAJOR[version], "Debian"))
            elif platform["name"] == "EL":
                hosts += [facts(name, version, "RedHat") for name in EL_DISTRIBUTIONS]
            else:
                raise AssertionError(f"no facts known for the platform {platform['name']}")
    return hosts


def facts(distribution: str, major: str, family: str) -> dict:
    return {
        "distribution": distribution,
        "distribution_major_version": major,
        "os_family": family,
    }
