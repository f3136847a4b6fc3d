# The ulimits role's own constants (its vars/main.yml) as options of its actions:
# the INTERNAL spec of the Validation in plugins/plugin_utils/ulimits_rules.py.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  limits_file:
    description: The role's limits.d file (C(__ulimits_limits_file) of its vars/main.yml).
    type: path
    required: true
  systemd_file:
    description: The role's system.conf.d drop-in (C(__ulimits_systemd_file)).
    type: path
    required: true
  header:
    description: The first line of the limits.d file, which marks it as managed
      (C(__ulimits_header)).
    type: str
    required: true
"""
