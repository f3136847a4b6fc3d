# The dataset_staging role's own constants (its vars/main.yml) as options of its actions:
# the INTERNAL spec of the Validation in plugins/plugin_utils/dataset_staging_rules.py.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  number_ranges:
    description: The range of each numeric variable, by its name a list of the lowest, the
      highest value and the unit (C(__dataset_staging_number_ranges) of the role's
      vars/main.yml).
    type: dict
    required: true
"""
