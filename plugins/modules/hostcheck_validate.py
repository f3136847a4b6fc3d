# The hostcheck role's validate action (plugins/action/hostcheck_validate.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: hostcheck_validate
short_description: Check the hostcheck role's variables, change nothing
description:
  - Checks the variables against roles/hostcheck/meta/argument_specs.yml, then each against
    what hostcheck accepts (its built-in profiles, check ids, config keys, the options the role
    sets itself) and the ranges of the numeric ones. On the controller, where this action runs,
    it asks C(systemd-analyze calendar) about I(hostcheck_timer_schedule) (when the timer is on
    and the controller has it) and hostcheck's own schema about I(hostcheck_config) (skipped,
    with a note, where hostcheck cannot be imported).
  - When the role is enabled, picks the role's per-OS vars (the OS packages and the python the
    venv needs); an OS without any fails.
  - The role's validate.yml runs it; main.yml gets the same result again in the run through
    I(validated), without checking again.
  - The host is not read; M(hostcheck.gpu_hosts.hostcheck_plan) reads it after the roles
    before this one.
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
  validated:
    description: This task's registered result from earlier in the run, returned again when the
      other arguments are the same.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: It changes nothing, so a check run does the same.
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.hostcheck_validate:
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
    validated: "{{ __hostcheck_validation | default({}) }}"
  register: __hostcheck_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use.
  type: dict
  returned: success
  contains:
    numbers:
      description: The numeric variables of I(number_ranges), as integers.
      type: dict
    os_vars:
      description: The role's per-OS vars for this host (C(__hostcheck_os_packages),
        C(__hostcheck_os_python)); empty when hostcheck_enabled is false.
      type: dict
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
msg:
  description: The notes of the validation.
  type: str
  returned: always
"""
