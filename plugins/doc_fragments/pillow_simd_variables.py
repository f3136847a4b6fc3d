# The pillow_simd role's variables as options of its validate and verify actions: generated
# from roles/pillow_simd/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  pillow_simd_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  pillow_simd_venv:
    description: Absolute path of the virtual environment; created with python3 -m venv if
      missing.
    type: str
    default: '{{ training_venv | default(''/opt/venvs/train'') }}'
  pillow_simd_version:
    description: Exact pillow-simd release, built from its source distribution.
    type: str
    default: 12.1.1.post0
  pillow_simd_avx2:
    description: auto, true or false; build with CC="cc -mavx2".
    type: raw
    default: auto
  pillow_simd_wheel_cache:
    description: Controller folder of built wheels shared by hosts of one OS release, arch,
      Python and AVX2; empty builds on every host.
    type: str
    default: '{{ lookup(''ansible.builtin.env'', ''HOME'') }}/.cache/hostcheck/pillow-simd-wheels'
  pillow_simd_venv_python:
    description: Interpreter that creates the venv when it is missing.
    type: str
    default: python3
  pillow_simd_extra_packages:
    description: Extra development packages to build against.
    type: list
    elements: str
    default: []
  pillow_simd_benchmark:
    description: Run the resize benchmark (and recount the build's AVX2 instructions with
      objdump) in every verify; false runs them only in a run where this role changed the
      venv, and the verify message says when they were not run.
    type: bool
    default: false
  pillow_simd_package_lock_timeout:
    description: Seconds to wait, before installing packages, for another process (apt-daily,
      unattended-upgrades, dnf-makecache) to release the package manager's locks; then the
      play fails naming the holder.
    type: int
    default: 600
"""
