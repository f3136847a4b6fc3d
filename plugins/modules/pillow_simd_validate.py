# The pillow_simd role's validate action (plugins/action/pillow_simd_validate.py); this file is
# its documentation.

DOCUMENTATION = r"""
module: pillow_simd_validate
short_description: Check the pillow_simd role's variables and what the host has, change nothing
description:
  - Checks the variables against roles/pillow_simd/meta/argument_specs.yml and each on its own
    terms (I(pillow_simd_venv) an absolute path of plain names, I(pillow_simd_version) one exact
    release, I(pillow_simd_avx2) auto, true or false, the cache an absolute controller path).
  - When the role is enabled, reads the host with one command (what is at I(pillow_simd_venv)
    and the flags of /proc/cpuinfo), decides the AVX2 build and why the host is skipped (no
    package list for its OS in roles/pillow_simd/vars, not x86-64, no SSE4.1), and works out
    the build inputs from this OS's vars file (the first of vars/<distribution>-<major>.yml,
    <distribution>.yml, <os_family>-<major>.yml, <os_family>.yml).
  - Fails, before any role changes anything, on a bad value (naming the variable), on a
    I(pillow_simd_venv) that cannot become a venv (a file, a symlink to nowhere, a directory
    with files but no pyvenv.cfg) and on I(pillow_simd_avx2=true) where the CPU lacks avx2.
  - The role's validate.yml runs it; main.yml and verify.yml get the same result again in the
    run through I(validated), without reading the host again.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.pillow_simd_variables
  - hostcheck.gpu_hosts.pillow_simd_constants
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.pillow_simd_validate:
    pillow_simd_enabled: "{{ pillow_simd_enabled }}"
    pillow_simd_venv: "{{ pillow_simd_venv }}"
    # ... every other pillow_simd_* variable the same way
    validated: "{{ __pillow_simd_validation | default({}) }}"
  register: __pillow_simd_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use (its vars/main.yml names each C(__pillow_simd_<value>));
    empty when pillow_simd_enabled is false.
  type: dict
  returned: success
  contains:
    cpu_flags:
      description: The flags of /proc/cpuinfo ([] where it lists none).
      type: list
      elements: str
    avx2_build:
      description: Whether to build with C(-mavx2).
      type: bool
    benchmark:
      description: I(pillow_simd_benchmark) as a boolean.
      type: bool
    skip_reason:
      description: Why pillow-simd cannot be built on this host; empty when it can (the values
        below are there only then).
      type: str
    venv:
      description: I(pillow_simd_venv) without a trailing C(/).
      type: str
      returned: when the host is not skipped
    version:
      description: I(pillow_simd_version) as a string.
      type: str
      returned: when the host is not skipped
    cache:
      description: I(pillow_simd_wheel_cache) as a real path on the controller (empty for none).
      type: str
      returned: when the host is not skipped
    os_vars:
      description: This OS's vars file (C(__pillow_simd_os_key), the lower-cased OS part of the
        wheel's cache key with its C({fact}) fields filled in, and the venv, compiler and
        library package lists).
      type: dict
      returned: when the host is not skipped
    packages_hash:
      description: The sha1 of the sorted library and extra packages, part of the wheel's cache
        key.
      type: str
      returned: when the host is not skipped
    probe_args:
      description: The arguments of C(files/pillow_simd_probe.py) for this host.
      type: list
      elements: str
      returned: when the host is not skipped
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
"""
