# The pillow_simd role's verify action (plugins/action/pillow_simd_verify.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: pillow_simd_verify
short_description: Prove that the venv's PIL is the pillow-simd the role built, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.pillow_simd_validate) does (or takes its result from
    I(validated)), then runs the role's C(files/pillow_simd_probe.py --runtime --hostcheck) on
    the host (one command, the probe after C(pillow_simd_common.py) on its standard input).
  - "Checks pip's pins (the venv's constraints.txt, read by its pip beside the global constraint
    files), that PIL comes from pillow-simd of I(pillow_simd_version) alone with the _imaging of
    the wheel the role built and the placeholder pillow, PIL in a fresh interpreter of the venv
    (version, libjpeg-turbo, JPEG, zlib), the build's AVX2 choice and count, and hostcheck's
    pillow check when hostcheck is in the venv."
  - The resize benchmark (and a recount of the AVX2 instructions with objdump) runs when
    I(pillow_simd_benchmark) is true or I(probe_run) found something to change; the message
    says when it did not run, and why.
  - Says what holds, or fails naming every mismatch; a host the role skips is not verified
    (the message says why).
extends_documentation_fragment:
  - hostcheck.gpu_hosts.pillow_simd_variables
  - hostcheck.gpu_hosts.pillow_simd_constants
  - hostcheck.gpu_hosts.role_action
options:
  probe_run:
    description: The registered result of the role's probe in tasks/main.yml in this run
      (C(__pillow_simd_probe_run)); its C(drift) says whether the role changed the venv. Empty
      when main.yml did not run (verify.yml alone).
    type: dict
    default: {}
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Verify pillow-simd (changes nothing)
  hostcheck.gpu_hosts.pillow_simd_verify:
    pillow_simd_enabled: "{{ pillow_simd_enabled }}"
    pillow_simd_venv: "{{ pillow_simd_venv }}"
    # ... every other pillow_simd_* variable the same way
    probe_run: "{{ __pillow_simd_probe_run | default(omit) }}"
    validated: "{{ __pillow_simd_validation | default({}) }}"
"""

RETURN = r"""
msg:
  description: What holds (pip's pins, PIL's owner, PIL at run time with the resize rate when
    measured, the AVX2 build, hostcheck's pillow check), or every mismatch.
  type: str
  returned: always
"""
