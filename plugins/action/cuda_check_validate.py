"""Validates the cuda_check role's variables (no host is read: the cuda_check_verify action,
which main.yml and verify.yml run, reads it).

    - hostcheck.gpu_hosts.cuda_check_validate:
        cuda_check_enabled: "{{ cuda_check_enabled }}"   # ... every cuda_check_* variable
        validated: "{{ __cuda_check_validation | default({}) }}"
      register: __cuda_check_validation

Checks, in this order: the version variables (each "" or dotted digits), cuda_check_venv and
the folder lists (the booleans and cuda_check_without_driver's choices are the argument spec's).
values.settings are what cuda_check_decide decides by (the version variables as
text, cuda_check_require_torch_cuda a boolean); documented in
plugins/modules/cuda_check_validate.py. The base is plugins/plugin_utils/role_action.py.
"""

from __future__ import annotations

import re

from ansible.plugins.filter.core import to_json
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import SETTINGS
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

# Each "" or dotted digits.
VERSION_VARIABLES = [
    "cuda_check_min_driver_version",
    "cuda_check_min_cuda_version",
    "cuda_check_toolkit_version",
    "cuda_check_cudnn_version",
    "cuda_check_torch_cuda_version",
]
# Each a list of absolute paths.
PATH_VARIABLES = [
    "cuda_check_toolkit_paths",
    "cuda_check_cudnn_include_paths",
    "cuda_check_cudnn_library_paths",
]
VERSION = re.compile(r"^([0-9]+(\.[0-9]+)*)?$")
VARIABLES = [
    "cuda_check_enabled",
    "cuda_check_venv",
    "cuda_check_without_driver",
    *VERSION_VARIABLES,
    *PATH_VARIABLES,
    "cuda_check_require_torch_cuda",
]


def _is_version(value: object) -> bool:
    # a string, or a whole number (not a bool, not a float: YAML reads 12.10 as 12.1)
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    else:
        return False
    return VERSION.match(text) is not None


def cuda_check_values(variables: dict) -> dict:
    """The variables checked (Invalid names the first bad one), and the settings the decision
    takes."""
    for name in VERSION_VARIABLES:
        value = variables[name]
        if not _is_version(value):
            raise Invalid(
                f'{name}: "" or a version of dotted digits such as "12.4" or "550.54.15", '
                f"quoted (unquoted, YAML reads 12.10 as the number 12.1); got {to_json(value)}"
            )
    venv = variables["cuda_check_venv"]
    if not venv.startswith("/") or re.search(r"\s", venv):
        raise Invalid(
            "cuda_check_venv: the absolute path of the training venv, without blanks; got "
            f"{to_json(venv)}"
        )
    for name in PATH_VARIABLES:
        value = variables[name]
        if not all(path.startswith("/") for path in value):
            raise Invalid(f"{name}: a list of absolute paths; got {to_json(value)}")
    settings = {name: variables[name] for name in SETTINGS}
    settings.update({name: str(variables[name]) for name in VERSION_VARIABLES})
    return {"settings": settings}


class ActionModule(RoleAction):
    ROLE = "cuda_check"
    SWITCHED_OFF = "driver, CUDA, cuDNN and torch versions not checked"

    def validate(self) -> dict:
        return cuda_check_values({name: self.arg(name) for name in VARIABLES})
