# The nvidia_driver role's own constants (its vars/main.yml) as options of its actions:
# the INTERNAL spec of the Validation in plugins/plugin_utils/nvidia_driver_rules.py.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  number_ranges:
    description: The range of each numeric variable, its lowest, highest value and unit
      (C(__nvidia_driver_number_ranges) of the role's vars/main.yml).
    type: dict
    required: true
  nouveau_file:
    description: The modprobe.d file the role blacklists nouveau in, read back by the probe
      (C(__nvidia_driver_nouveau_file)).
    type: path
    required: true
"""
