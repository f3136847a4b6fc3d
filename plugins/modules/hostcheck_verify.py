# The hostcheck role's verify action (plugins/action/hostcheck_verify.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: hostcheck_verify
short_description: Prove that hostcheck is installed, set up and passing, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.hostcheck_validate) does (or takes its result from
    I(validated)), then reads the host once with M(hostcheck.gpu_hosts.hostcheck_probe).
  - Persisted - hostcheck installed in the venv, I(hostcheck_config_file) holding
    I(hostcheck_config) (or absent), the latest report valid and written by this hostcheck for
    this profile, the timer's units as the hostcheck_timer_* variables say (or none), the
    DataLoader settings file measured on this host for the workload the hostcheck_dataloader_*
    variables give (or, switched off, none of the role's).
  - Live - with systemd, the timer enabled and active; and hostcheck passing - its latest report
    passed for the host state as it is now, or it passed in this run, else it runs now
    (I(argv_stdout), writing nothing) and must pass.
  - Says what holds, or fails naming every mismatch.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.hostcheck_variables
  - hostcheck.gpu_hosts.hostcheck_constants
  - hostcheck.gpu_hosts.role_action
options:
  probe:
    description: What M(hostcheck.gpu_hosts.hostcheck_probe) reads (C(__hostcheck_probe)); its
      C(unit_dir) is where the timer's units are.
    type: dict
    required: true
  timer_units:
    description: The text of hostcheck.service and hostcheck.timer as the role writes them, by
      unit name (C(__hostcheck_timer_units)); empty with O(hostcheck_timer_enabled=false).
    type: dict
    required: true
  timer_argv:
    description: The command line hostcheck.service runs (C(__hostcheck_timer_argv)).
    type: list
    elements: str
    required: true
  argv_stdout:
    description: The hostcheck run that reports to standard output only, run when the latest
      report does not stand (C(__hostcheck_argv_stdout)).
    type: list
    elements: str
    required: true
  passed_in_this_run:
    description: Whether hostcheck ran and passed at the end of provisioning in this run
      (C(__hostcheck_passed_in_this_run)).
    type: bool
    required: true
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify hostcheck (changes nothing)
  hostcheck.gpu_hosts.hostcheck_verify:
    hostcheck_enabled: "{{ hostcheck_enabled }}"
    hostcheck_venv: "{{ hostcheck_venv }}"
    # ... every other hostcheck_* variable the same way
    number_ranges: "{{ __hostcheck_number_ranges }}"
    probe: "{{ __hostcheck_probe }}"
    timer_units: "{{ __hostcheck_timer_units }}"
    timer_argv: "{{ __hostcheck_timer_argv }}"
    argv_stdout: "{{ __hostcheck_argv_stdout }}"
    passed_in_this_run: "{{ __hostcheck_passed_in_this_run }}"
    validated: "{{ __hostcheck_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (hostcheck and its config and report, the timer, the DataLoader
    settings file, the verdict), or every mismatch.
  type: str
  returned: always
"""
