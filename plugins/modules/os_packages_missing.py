#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Which OS packages are not installed yet, from the package database alone (no apt or dnf)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: os_packages_missing
short_description: Say which of some OS packages are not installed, change nothing
description:
  - Asks the package database (dpkg-query, or rpm for dnf and yum hosts) and nothing else, so
    it costs a fraction of an apt or dnf task; roles install only when something is missing.
  - On rpm hosts a name counts as installed when an installed package has it for its name,
    with or without version, release and architecture as C(rpm -q) takes it (so
    C(kernel-devel-<uname -r>) on RHEL), or provides it (so C(python3-devel) or C(gcc-c++) as
    dnf would resolve them).
options:
  names:
    description: Package names as the role would give them to apt or dnf.
    type: list
    elements: str
    required: true
  manager:
    description: The host's package manager (Ansible's C(ansible_facts.pkg_mgr)).
    type: str
    required: true
    choices: [apt, dnf, dnf5, yum]
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Which of these packages dnf has not installed
  hostcheck.gpu_hosts.os_packages_missing:
    names: [libjpeg-turbo-devel, zlib-devel]
    manager: dnf
  register: missing
"""

RETURN = r"""
missing:
  description: The names that are not installed, in the order given.
  type: list
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dpkg_status import (
    QUERY,
    dpkg_states,
)


def installed_by_dpkg(output: str) -> set[str]:
    """The packages dpkg_status.QUERY's output says are installed (state "i")."""
    return {name for name, state, dummy in dpkg_states(output) if state == "i"}


def missing_by_rpm(output: str) -> set[str]:
    """The names rpm says it has not: `rpm -q` says "package NAME is not installed", and
    `rpm -q --whatprovides` "no package provides NAME"."""
    absent = set()
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("no package provides "):
            absent.add(line.removeprefix("no package provides "))
        elif line.startswith("package ") and line.endswith(" is not installed"):
            absent.add(line.removeprefix("package ").removesuffix(" is not installed"))
    return absent


def missing(module: AnsibleModule, names: list[str], manager: str) -> list[str]:
    if not names:
        return []
    if manager == "apt":
        dummy, out, dummy = module.run_command([*QUERY, "--", *names])
        installed = installed_by_dpkg(out)
        return [name for name in names if name.split(":", 1)[0] not in installed]
    dummy, out, err = module.run_command(["rpm", "-q", "--", *names])
    absent = missing_by_rpm(out + err)
    if absent:
        unnamed = [name for name in names if name in absent]
        dummy, out, err = module.run_command(["rpm", "-q", "--whatprovides", "--", *unnamed])
        absent = missing_by_rpm(out + err)
    return [name for name in names if name in absent]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "required": True},
            "manager": {"type": "str", "required": True, "choices": ["apt", "dnf", "dnf5", "yum"]},
        },
        supports_check_mode=True,
    )
    params = module.params
    module.exit_json(changed=False, missing=missing(module, params["names"], params["manager"]))


if __name__ == "__main__":
    main()
