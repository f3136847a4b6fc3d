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
options:
  number_ranges:
    description: The range of each numeric variable, C([lowest, highest, unit])
      (C(__hostcheck_number_ranges) of the role's vars/main.yml).
    type: dict
    required: true
  builtin_profiles:
    description: hostcheck's built-in profiles (C(__hostcheck_builtin_profiles)).
    type: list
    elements: str
    required: true
  config_keys:
    description: The top-level keys a hostcheck --config file may have
      (C(__hostcheck_config_keys)).
    type: list
    elements: str
    required: true
  check_ids:
    description: hostcheck's check ids, the keys of I(hostcheck_config)'s checks
      (C(__hostcheck_check_ids)).
    type: list
    elements: str
    required: true
  reserved_args:
    description: The options of hostcheck run the role sets itself, which
      I(hostcheck_extra_args) must not repeat (C(__hostcheck_reserved_args)).
    type: list
    elements: str
    required: true
  probe:
    description: What M(hostcheck.gpu_hosts.hostcheck_probe) reads (C(__hostcheck_probe)); its
      C(unit_dir) is where the timer's units are.
    type: dict
    required: true
  timer_units:
    description: The text of hostcheck.service and hostcheck.timer as the role writes them, by
      unit name (C(__hostcheck_timer_units)).
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
  validated:
    description: The registered result of M(hostcheck.gpu_hosts.hostcheck_validate) from
      earlier in the run, returned again when the variables and constants are the same (the
      arguments of the reading aside).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: It changes nothing, so a check run does the same.
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read what hostcheck needs on this host (changes nothing)
  hostcheck.gpu_hosts.hostcheck_plan:
    hostcheck_enabled: "{{ hostcheck_enabled }}"
    hostcheck_venv: "{{ hostcheck_venv }}"
    hostcheck_venv_python: "{{ hostcheck_venv_python }}"
    hostcheck_wheel: "{{ hostcheck_wheel }}"
    hostcheck_build_source: "{{ hostcheck_build_source }}"
    hostcheck_build_python: "{{ hostcheck_build_python }}"
    hostcheck_build_cache: "{{ hostcheck_build_cache }}"
    hostcheck_pip_packages_before: "{{ hostcheck_pip_packages_before }}"
    hostcheck_cache_dir: "{{ hostcheck_cache_dir }}"
    hostcheck_run: "{{ hostcheck_run }}"
    hostcheck_measure: "{{ hostcheck_measure }}"
    hostcheck_profile: "{{ hostcheck_profile }}"
    hostcheck_config: "{{ hostcheck_config }}"
    hostcheck_config_file: "{{ hostcheck_config_file }}"
    hostcheck_extra_args: "{{ hostcheck_extra_args }}"
    hostcheck_fail_on: "{{ hostcheck_fail_on }}"
    hostcheck_report_dir: "{{ hostcheck_report_dir }}"
    hostcheck_timer_enabled: "{{ hostcheck_timer_enabled }}"
    hostcheck_timer_schedule: "{{ hostcheck_timer_schedule }}"
    hostcheck_timer_randomized_delay_sec: "{{ hostcheck_timer_randomized_delay_sec }}"
    hostcheck_timer_profile: "{{ hostcheck_timer_profile }}"
    hostcheck_textfile_dir: "{{ hostcheck_textfile_dir }}"
    hostcheck_dataloader_enabled: "{{ hostcheck_dataloader_enabled }}"
    hostcheck_dataloader_path: "{{ hostcheck_dataloader_path }}"
    hostcheck_dataloader_sample: "{{ hostcheck_dataloader_sample }}"
    hostcheck_dataloader_sample_cost_us: "{{ hostcheck_dataloader_sample_cost_us }}"
    hostcheck_dataloader_batch_size: "{{ hostcheck_dataloader_batch_size }}"
    hostcheck_dataloader_step_ms: "{{ hostcheck_dataloader_step_ms }}"
    hostcheck_dataloader_ranks_per_node: "{{ hostcheck_dataloader_ranks_per_node }}"
    hostcheck_dataloader_dataset_path: "{{ hostcheck_dataloader_dataset_path }}"
    hostcheck_dataloader_max_workers: "{{ hostcheck_dataloader_max_workers }}"
    hostcheck_dataloader_seconds: "{{ hostcheck_dataloader_seconds }}"
    number_ranges: "{{ __hostcheck_number_ranges }}"
    builtin_profiles: "{{ __hostcheck_builtin_profiles }}"
    config_keys: "{{ __hostcheck_config_keys }}"
    check_ids: "{{ __hostcheck_check_ids }}"
    reserved_args: "{{ __hostcheck_reserved_args }}"
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
