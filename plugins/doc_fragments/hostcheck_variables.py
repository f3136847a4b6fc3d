# The hostcheck role's variables as options of its validate and verify actions: generated
# from roles/hostcheck/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  hostcheck_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  hostcheck_venv:
    description: Absolute path of the Python venv hostcheck goes into (created if missing).
    type: str
    default: '{{ training_venv | default(''/opt/venvs/train'') }}'
  hostcheck_venv_python:
    description: Interpreter that creates the venv; empty for the OS's own.
    type: str
    default: ''
  hostcheck_wheel:
    description: 'A pip requirement (the default: this collection''s version from the hosts''
      index); a controller path ending in .whl; or empty to build a wheel from hostcheck_build_source.'
    type: str
    default: hostcheck[node]==0.1.0
  hostcheck_build_source:
    description: Checkout of hostcheck with pyproject.toml on the controller, built when hostcheck_wheel
      is empty.
    type: str
    default: ''
  hostcheck_build_python:
    description: Python with pip on the controller that builds the wheel.
    type: str
    default: '{{ ansible_playbook_python }}'
  hostcheck_build_cache:
    description: Folder on the controller that keeps built wheels.
    type: str
    default: '{{ hostcheck_build_source }}/.cache/hostcheck-wheels'
  hostcheck_pip_packages_before:
    description: pip requirements installed into the venv before hostcheck (torch==2.13.0).
    type: list
    elements: str
    default: []
  hostcheck_cache_dir:
    description: Folder on the host that keeps the installed wheel.
    type: str
    default: /var/cache/hostcheck
  hostcheck_run:
    description: Run hostcheck now (false installs only).
    type: bool
    default: true
  hostcheck_measure:
    description: 'When hostcheck runs, with the loop, the Pillow benchmarks, the storage read
      test and DCGM''s diagnostic: changed, when the role changed something, the last report
      did not pass or the host state it was made for changed (else its results stand); always,
      on every converge.'
    type: str
    default: changed
    choices:
    - changed
    - always
  hostcheck_profile:
    description: Built-in profile name or the absolute path of a profile file on the host.
    type: str
    default: default
  hostcheck_config:
    description: Thresholds merged over the profile, written to hostcheck_config_file.
    type: dict
    default: {}
  hostcheck_config_file:
    description: Where hostcheck_config is written on the host.
    type: str
    default: /etc/hostcheck/config.yaml
  hostcheck_extra_args:
    description: More arguments for hostcheck run, one per item.
    type: list
    elements: str
    default: []
  hostcheck_fail_on:
    description: Lowest check status that fails the host.
    type: str
    default: fail
    choices:
    - fail
    - warn
  hostcheck_report_dir:
    description: Folder on the host that keeps the reports (latest at report.json).
    type: str
    default: /var/lib/hostcheck
  hostcheck_timer_enabled:
    description: Install a systemd timer that runs hostcheck and writes a Prometheus textfile.
      The timer runs hostcheck as root, so hostcheck_venv must then be writable by root alone
      (refused otherwise, before any change).
    type: bool
    default: false
  hostcheck_timer_schedule:
    description: systemd OnCalendar= expression of the timer.
    type: str
    default: '*:0/15'
  hostcheck_timer_randomized_delay_sec:
    description: RandomizedDelaySec= of the timer, in seconds.
    type: int
    default: 120
  hostcheck_timer_profile:
    description: Profile the timer runs (built-in name or absolute path on the host).
    type: str
    default: quick
  hostcheck_textfile_dir:
    description: Folder node_exporter's textfile collector reads; hostcheck.prom goes there.
    type: str
    default: /var/lib/node_exporter/textfile_collector
  hostcheck_dataloader_enabled:
    description: Measure the DataLoader setting this host feeds best (hostcheck loop --sweep
      --write) into hostcheck_dataloader_path; false removes the file an earlier run wrote.
    type: bool
    default: false
  hostcheck_dataloader_path:
    description: The DataLoader settings file on the host, read by training code with hostcheck.dataloader.settings()
      and by hostcheck run's dataloader check.
    type: str
    default: /etc/hostcheck/dataloader.json
  hostcheck_dataloader_sample:
    description: 'The samples the sweep loads: jpeg (decode, random-resized-crop, flip), busy
      (calibrated CPU work) or sleep (a wait).'
    type: str
    default: jpeg
    choices:
    - jpeg
    - busy
    - sleep
  hostcheck_dataloader_sample_cost_us:
    description: Microseconds of work per sample for busy and sleep.
    type: int
    default: 2000
  hostcheck_dataloader_batch_size:
    description: Samples per batch, as the training jobs load them.
    type: int
    default: 32
  hostcheck_dataloader_step_ms:
    description: Compute time of one training step, in milliseconds.
    type: int
    default: 100
  hostcheck_dataloader_ranks_per_node:
    description: Training processes per host, which share its cores; 0 for one per NVIDIA
      GPU on the PCI bus (1 on a host without).
    type: int
    default: 0
  hostcheck_dataloader_dataset_path:
    description: Folder on the host whose files the samples are read from (it must exist when
      the sweep runs); empty for samples generated in memory.
    type: str
    default: ''
  hostcheck_dataloader_max_workers:
    description: Most num_workers the sweep tries; 0 for the host's physical cores divided
      by the ranks per host (at least 1).
    type: int
    default: 0
  hostcheck_dataloader_seconds:
    description: Measured seconds per configuration, a number above 0 (0.5 is one); the role
      checks it; the sweep tries about 4 x (max workers + 1) + 3 (fewer without CUDA). Changing
      it does not measure again.
    type: raw
    default: 2
  hostcheck_package_lock_timeout:
    description: Seconds to wait, before installing packages, for another process (apt-daily,
      unattended-upgrades, dnf-makecache) to release the package manager's locks; then the
      play fails naming the holder.
    type: int
    default: 600
"""
