"""Fails a role on an OS its meta/main.yml does not list, naming the OS and what is supported.

    - name: Check that this role supports the host's OS
      role_platform_check:

Reads the distribution facts (gathering just those when the play did not) and the calling
role's galaxy_info.platforms; changes nothing on the host.
"""

from __future__ import annotations

import os

import yaml
from ansible.plugins.action import ActionBase

# Ansible's distribution names of the RHEL family, which Galaxy calls EL
EL = {"RedHat", "Rocky", "AlmaLinux", "CentOS", "OracleLinux"}


def platform_of(facts: dict) -> tuple[str, str]:
    """(Galaxy platform name, version) of a host: Debian and Ubuntu by codename, EL by major."""
    distribution = facts.get("distribution", "")
    if distribution in ("Debian", "Ubuntu"):
        return distribution, facts.get("distribution_release", "")
    if distribution in EL:
        return "EL", str(facts.get("distribution_major_version", ""))
    return distribution, str(facts.get("distribution_major_version", ""))


def supported_text(platforms: list[dict]) -> str:
    return "; ".join(f"{p['name']} {', '.join(map(str, p['versions']))}" for p in platforms)


def problem(facts: dict, platforms: list[dict], role: str) -> str:
    """'' when the role supports this host's OS, else the one-line reason."""
    name, version = platform_of(facts)
    for platform in platforms:
        if platform["name"] == name and version in map(str, platform["versions"]):
            return ""
    shown = (
        f"{facts.get('distribution') or 'an unknown OS'} {facts.get('distribution_version', '')}"
    )
    return (
        f"{role}: {shown.strip()} is not supported; the role runs on {supported_text(platforms)} "
        f"(set {role}_enabled: false for this host to leave it alone)"
    )


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        facts = dict((task_vars or {}).get("ansible_facts") or {})
        if "distribution" not in facts:
            gathered = self._execute_module(
                module_name="ansible.builtin.setup",
                module_args={"gather_subset": ["!all", "!min", "distribution"]},
                task_vars=task_vars,
            )
            if gathered.get("failed"):
                return {**result, **gathered}
            facts = {
                key.removeprefix("ansible_"): value
                for key, value in gathered.get("ansible_facts", {}).items()
            }
        role = self._task._role
        with open(os.path.join(role._role_path, "meta", "main.yml")) as handle:
            platforms = yaml.safe_load(handle)["galaxy_info"]["platforms"]
        reason = problem(facts, platforms, role.get_name(include_role_fqcn=False))
        result["changed"] = False
        if reason:
            result["failed"] = True
            result["msg"] = reason
        else:
            name, version = platform_of(facts)
            result["msg"] = f"{name} {version} is supported"
        return result
