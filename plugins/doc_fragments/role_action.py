# What every role's validate, plan and verify action takes besides the role's variables
# (plugins/plugin_utils/role_action.py).


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  validated:
    description:
      - The role's validation registered earlier in the run (C(__<role>_validation)); its values
        are returned again, without checking or reading the host again, when the other
        arguments are the same.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: It changes nothing, so a check run does the same.
"""
