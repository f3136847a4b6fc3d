# The hostcheck role's own constants (its vars/main.yml) as options of its actions:
# the INTERNAL spec of the Validation in plugins/plugin_utils/hostcheck_rules.py.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  number_ranges:
    description: The range of each numeric variable, C([lowest, highest, unit])
      (C(__hostcheck_number_ranges) of the role's vars/main.yml).
    type: dict
    required: true
"""
