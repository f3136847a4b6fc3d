# The cuda_check role's validate action (plugins/action/cuda_check_validate.py); this file is its
# documentation.

DOCUMENTATION = r"""
module: cuda_check_validate
short_description: Check the cuda_check role's variables, read nothing on the host
description:
  - Checks the variables against roles/cuda_check/meta/argument_specs.yml, then, in this order,
    I(cuda_check_without_driver), the version variables (each C("") or dotted digits, quoted,
    since unquoted YAML reads 12.10 as the number 12.1), I(cuda_check_venv) (an absolute path
    without blanks) and the folder lists (absolute paths); fails naming the first bad one.
  - Reads nothing on the host; M(hostcheck.gpu_hosts.cuda_check_verify) reads it.
  - The role's validate.yml runs it; main.yml and verify.yml get the same result again in the
    run through I(validated).
extends_documentation_fragment:
  - hostcheck.gpu_hosts.cuda_check_variables
  - hostcheck.gpu_hosts.role_action
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Validate the variables
  hostcheck.gpu_hosts.cuda_check_validate:
    cuda_check_enabled: "{{ cuda_check_enabled }}"
    cuda_check_venv: "{{ cuda_check_venv }}"
    # ... every other cuda_check_* variable the same way
    validated: "{{ __cuda_check_validation | default({}) }}"
  register: __cuda_check_validation
"""

RETURN = r"""
values:
  description: What the role's tasks use.
  type: dict
  returned: success
  contains:
    settings:
      description: What cuda_check_decide decides by (plugins/plugin_utils/cuda_check_rules.py),
        by variable name; the version variables as text, I(cuda_check_require_torch_cuda) a
        boolean.
      type: dict
digest:
  description: A digest of the arguments, which I(validated) is matched by.
  type: str
  returned: success
"""
