# The cuda_check role's verify action (plugins/action/cuda_check_verify.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: cuda_check_verify
short_description: Check the driver, CUDA, cuDNN and torch versions of a GPU host, change nothing
description:
  - Validates as M(hostcheck.gpu_hosts.cuda_check_validate) does (or takes its result from
    I(validated)), then reads the host once, running roles/cuda_check/files/cuda_facts.py by the
    python of I(cuda_check_venv) (the OS's python3 when the venv has none, said in the message)
    with M(hostcheck.gpu_hosts.host_read), searching the cuDNN folders given or the OS's usual
    ones (the role's per-OS vars).
  - The script reports what the host gives as it gives it (NVML's CUDA driver number such as
    12040, a toolkit header's CUDART_VERSION, torch's cuDNN number such as 90100, each NVIDIA
    PCI function's class); cuda_check_facts (plugins/plugin_utils/cuda_check_rules.py) makes
    them versions and a count of GPUs by the rules hostcheck applies too (module_utils
    cuda_compat and pci, where any NVIDIA display controller is a GPU, an NVSwitch is not).
  - Decides with cuda_check_decide (plugins/plugin_utils/cuda_check_rules.py); fails when the
    driver cannot run torch's CUDA build or a version asked for is missing, showing every
    version side by side and one line per problem naming the variable that asks for it.
  - The role's main.yml runs it and registers the result; verify.yml gives that result as
    I(checked) and gets the same verdict again without reading the host.
extends_documentation_fragment:
  - hostcheck.gpu_hosts.cuda_check_variables
  - hostcheck.gpu_hosts.role_action
options:
  checked:
    description: This action's registered result from main.yml earlier in the run
      (C(__cuda_check_checked)); when it holds versions and did not fail, it is said again and
      the host is not read.
    type: dict
    default: {}
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Check the driver, CUDA, cuDNN and torch versions (changes nothing)
  hostcheck.gpu_hosts.cuda_check_verify:
    cuda_check_enabled: "{{ cuda_check_enabled }}"
    cuda_check_venv: "{{ cuda_check_venv }}"
    # ... every other cuda_check_* variable the same way
    checked: "{{ __cuda_check_checked | default(omit) }}"
    validated: "{{ __cuda_check_validation | default({}) }}"
  register: __cuda_check_checked
"""

RETURN = r"""
msg:
  description: The verdict (C(pass) or C(skip) and why), after a note when the venv has no
    python; or, failed, the versions side by side and every problem.
  type: str
  returned: always
versions:
  description: The versions side by side, one line each, and one line per problem and warning.
  type: list
  elements: str
  returned: when the versions were read or checked earlier in the run
"""
