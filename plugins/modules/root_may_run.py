#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Refuse, before a role installs anything, a program that root would run on a schedule when
someone besides root can change it or what it imports."""

from __future__ import annotations

DOCUMENTATION = r"""
module: root_may_run
short_description: Refuse a program root runs on a schedule that others can change
description:
  - The hostcheck timer and Slurm's health check run hostcheck as root from the training
    venv. Where the users who train can write to that venv (they C(pip install) into it), any
    of them can change what root runs.
  - This module reads who can change the program, the folders above it and, for a venv, every
    file under it (the interpreter, site-packages, .pth files), following links. A path is
    safe when it and every folder above it are owned by root and writable by no other user or
    group; a folder with the sticky bit above (like /tmp) is allowed.
  - It fails with one line naming the variable, the first problem and the ways out. It
    changes nothing; a path that does not exist yet is judged by the nearest folder above it
    (the role creates the rest as root).
options:
  program:
    description: Absolute path of the program root runs.
    type: path
    required: true
  venv:
    description:
      - The venv the program runs from. Default, the folder above the program's folder when
        it holds a pyvenv.cfg; without a venv, the program and the interpreter its first line
        names are read.
    type: path
  variable:
    description: The role variable that names the program or its venv, named in the message.
    type: str
    required: true
  runs_it:
    description: What runs the program as root (said in the message), e.g. the hostcheck timer.
    type: str
    required: true
  switch:
    description: The role variable that turns that schedule off, offered as a way out.
    type: str
    required: true
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Refuse a training venv users can write when the timer runs hostcheck as root
  hostcheck.gpu_hosts.root_may_run:
    program: "{{ hostcheck_venv }}/bin/hostcheck"
    venv: "{{ hostcheck_venv }}"
    variable: hostcheck_venv
    runs_it: the hostcheck timer
    switch: hostcheck_timer_enabled
"""

RETURN = r"""
problems:
  description: Each way others can change what root runs (at most 20 of the venv's files).
  type: list
  elements: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.root_trust import (
    first_and_count,
    program_problems,
)


def refusal(params: dict, problems: list[str]) -> str:
    program, venv = params["program"], params["venv"]
    owned = venv or os.path.dirname(program)
    return (
        f"{params['variable']}: {params['runs_it']} would run {program} as root, and others can "
        f"change what it runs: {first_and_count(problems)}. Make it root's alone "
        f"(chown -R root:root {owned}; chmod -R go-w {owned}), point {params['variable']} at an "
        f"install only root can write, or set {params['switch']}: false"
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "program": {"type": "path", "required": True},
            "venv": {"type": "path"},
            "variable": {"type": "str", "required": True},
            "runs_it": {"type": "str", "required": True},
            "switch": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    for name in ("program", "venv"):
        if params[name] is not None and not os.path.isabs(params[name]):
            module.fail_json(msg=f"{params['variable']}: {params[name]} is not an absolute path")
    problems = program_problems(params["program"], params["venv"])
    if problems:
        module.fail_json(msg=refusal(params, problems), problems=problems)
    module.exit_json(changed=False, problems=[])


if __name__ == "__main__":
    main()
