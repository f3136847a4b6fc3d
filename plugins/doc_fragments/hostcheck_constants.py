# The hostcheck role's own constants (its vars/main.yml) as options of its actions:
# the INTERNAL spec of plugins/action/hostcheck_validate.py.


class ModuleDocFragment:
    DOCUMENTATION = r"""
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
"""
