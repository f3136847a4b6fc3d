"""Validates the shm role's variables (no host is read): shm_size and shm_mount_options.

    - hostcheck.gpu_hosts.shm_validate:
      register: __shm_validation

values.option is what tmpfs takes after size= (N% or bytes); the rest is in
plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import re

from ansible_collections.hostcheck.gpu_hosts.plugins.filter.sizes import tmpfs_size_option
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    Invalid,
    RoleValidation,
)

PLAIN_OPTION = re.compile(r"^[a-z_]+(=[^,\s]+)?$")


def shm_values(size: object, mount_options: object) -> dict:
    """What the role's tasks use, or Invalid naming the variable."""
    option = tmpfs_size_option(size, "shm_size")
    if not isinstance(mount_options, list) or any(
        not isinstance(item, str) or item.startswith("size=") or not PLAIN_OPTION.match(item)
        for item in mount_options
    ):
        raise Invalid(
            "shm_mount_options: plain mount options without size= (that is shm_size), "
            f"got {mount_options}"
        )
    return {"option": option}


class ActionModule(RoleValidation):
    def validate(self) -> dict:
        return shm_values(self.var("shm_size"), self.var("shm_mount_options"))
