# The hostcheck role's plan action (plugins/action/hostcheck_plan.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: hostcheck_plan
short_description: Read what the hostcheck role must do on a host, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.hostcheck_validate) does (or takes its result from
    I(validated)), then reads the host once with M(hostcheck.gpu_hosts.hostcheck_probe) and
    returns C(plan) - what install, config, the timer and the DataLoader settings file must
    change, and why hostcheck must run (when asked by hostcheck_measure, when this run installs
    or configures it or changes the settings file, or when its latest report did not pass or
    the host state it was made for changed).
  - tasks/main.yml runs it after the roles before this one, so it sees the host they left.
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
  config_text:
    description: The text of I(hostcheck_config_file) as the role writes it
      (C(__hostcheck_config_text)).
    type: str
    required: true
  bin:
    description: The hostcheck command in the venv (C(__hostcheck_bin)).
    type: str
    required: true
  wheel_read:
    description: The controller's wheel as tasks/wheel.yml read it (its registered
      C(__hostcheck_wheel_read); skipped when hostcheck_wheel is a requirement, null before
      that task ran).
    type: dict
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read what hostcheck needs on this host (changes nothing)
  hostcheck.gpu_hosts.hostcheck_plan:
    hostcheck_enabled: "{{ hostcheck_enabled }}"
    hostcheck_venv: "{{ hostcheck_venv }}"
    # ... every other hostcheck_* variable the same way
    number_ranges: "{{ __hostcheck_number_ranges }}"
    probe: "{{ __hostcheck_probe }}"
    timer_units: "{{ __hostcheck_timer_units }}"
    config_text: "{{ __hostcheck_config_text }}"
    bin: "{{ __hostcheck_bin }}"
    wheel_read: "{{ __hostcheck_wheel_read | default(none) }}"
    validated: "{{ __hostcheck_validation | default({}) }}"
  register: __hostcheck_host
"""

RETURN = r"""
plan:
  description: What the role must do on this host (tasks/main.yml registers it as
    C(__hostcheck_host); vars/main.yml's C(__hostcheck_plan)).
  type: dict
  returned: when hostcheck_enabled
  contains:
    install:
      description: Why the venv needs pip; empty when it holds what is wanted.
      type: list
      elements: str
    install_hostcheck:
      description: Whether hostcheck itself is (re)installed.
      type: bool
    config:
      description: Why hostcheck_config_file is written or removed; empty when it is as wanted.
      type: list
      elements: str
    timer:
      description: Why the timer's units or state change; empty when they are as wanted.
      type: list
      elements: str
    dataloader:
      description: Why the DataLoader settings file is measured again or removed; empty when it
        stands.
      type: list
      elements: str
    dataloader_argv:
      description: The hostcheck loop --sweep --write command line that measures it; empty when
        it is not measured.
      type: list
      elements: str
    run:
      description: Why hostcheck runs; empty when its latest report stands (or hostcheck_run is
        false).
      type: list
      elements: str
    hostcheck:
      description: The version of hostcheck in the venv, null when it is not installed.
      type: str
    torch:
      description: The version of torch in the venv, null when it is not installed.
      type: str
    systemd:
      description: Whether systemd is the init system (/run/systemd/system).
      type: bool
    units_present:
      description: The hostcheck units in the unit folder.
      type: list
      elements: str
msg:
  description: What changes and why hostcheck runs or not.
  type: str
  returned: always
"""
