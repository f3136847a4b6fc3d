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
  validated:
    description: The registered result of M(hostcheck.gpu_hosts.hostcheck_validate) from earlier
      in the run.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: It changes nothing, so a check run does the same.
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify hostcheck (changes nothing)
  hostcheck.gpu_hosts.hostcheck_verify:
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
