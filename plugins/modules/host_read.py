#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Runs a command that only reads the host, in check mode too: the roles' validate and verify
actions read the host with it where no probe module of their own does."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_read
short_description: Run a command that only reads the host, also in check mode
description:
  - Runs I(argv) (no shell unless argv names one) with I(stdin) and returns its exit code and
    output, never failing on a non-zero exit (the caller judges the result).
  - Unlike ansible.builtin.command it runs in check mode, because the roles' validations must
    read the host in a C(--check) run to say what would change. Only commands that change
    nothing may be given; the roles' actions give scripts that read /proc, df, findmnt or run
    an interpreter's import check.
options:
  argv:
    description: The command and its arguments.
    type: list
    elements: str
    required: true
  stdin:
    description: Text given on the command's standard input.
    type: str
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: The size of the file system /data is on (changes nothing, also in check mode)
  hostcheck.gpu_hosts.host_read:
    argv: [df, --output=size, -B1, /data]
  register: df_data
"""

RETURN = r"""
rc:
  description: The command's exit code.
  type: int
  returned: always
stdout:
  description: Its standard output, without the last line break (as ansible.builtin.command).
  type: str
  returned: always
stderr:
  description: Its standard error.
  type: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "argv": {"type": "list", "elements": "str", "required": True},
            "stdin": {"type": "str"},
        },
        supports_check_mode=True,
    )
    rc, stdout, stderr = module.run_command(
        module.params["argv"], data=module.params["stdin"], binary_data=False
    )
    module.exit_json(
        changed=False, rc=rc, stdout=stdout.rstrip("\r\n"), stderr=stderr.rstrip("\r\n")
    )


if __name__ == "__main__":
    main()
