"""The former base of the `<role>_validate` and `<role>_verify` actions, for the roles not yet
moved to plugins/plugin_utils/role_action.py: the task passes no arguments and the action reads
every `<role>_*` variable itself, as given (booleans converted as the argument spec converts
them, the rest only checked), and its earlier result from `__<role>_validation`.

    - name: Validate the variables
      hostcheck.gpu_hosts.ulimits_validate:
      register: __ulimits_validation
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml
from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
    argument_spec,
)


class RoleValidation(RoleAction):
    def run(self, tmp=None, task_vars=None):
        self._vars = task_vars or {}
        self.role = self.ROLE = self._task._role.get_name(include_role_fqcn=False)
        self.role_path = self._task._role._role_path
        return super().run(tmp, task_vars)

    def checked_arguments(self) -> dict:
        """Every <role>_* variable, templated and checked against the role's argument spec."""
        names = [name for name in sorted(self._vars) if name.startswith(f"{self.role}_")]
        self.given = {name: self.value(name) for name in names}
        options = dict(argument_spec(self.role))
        options.pop("validated")
        given = {name: self.given[name] for name in options if name in self.given}
        checked = ArgumentSpecValidator(options).validate(given, validate_role_argument_spec=True)
        if checked.error_messages:
            raise Invalid(
                f"{self.role}: validation of arguments failed: " + "; ".join(checked.error_messages)
            )
        for name, option in options.items():
            if option.get("type") == "bool" and name in given:
                self.given[name] = checked.validated_parameters[name]
        earlier = self._vars.get(f"__{self.role}_validation")
        if not isinstance(earlier, Mapping) or earlier.get("failed"):
            earlier = {}
        return {**self.given, "validated": earlier}

    def value(self, name: str):
        """A variable's value, templated; Invalid when it is not defined."""
        if name not in self._vars:
            raise Invalid(f"{name}: not defined")
        try:
            return self._templar.template(self._vars[name])
        except AnsibleError as exc:
            raise Invalid(f"{name}: {exc.message}") from exc

    def var(self, name: str):
        """A role variable as given (validate() reads these), else the templated variable."""
        if name in getattr(self, "given", {}):
            return self.given[name]
        return self.value(name)

    def os_vars(self, candidates: list[str], *, required: bool = False) -> dict:
        """The first of vars/CANDIDATE.yml that exists (names formatted with the facts), loaded;
        required: Invalid naming <role>_enabled when none exists."""
        facts = self.facts()
        for candidate in candidates:
            path = os.path.join(self.role_path, "vars", candidate.format(**facts) + ".yml")
            if os.path.isfile(path):
                with open(path) as handle:
                    return yaml.safe_load(handle) or {}
        if required:
            raise Invalid(
                f"{self.role}_enabled: no vars file in roles/{self.role}/vars for "
                f"{facts.get('distribution')} {facts.get('distribution_version')}"
            )
        return {}

    def on_host(self, module: str, args: dict, *, fail: bool = True) -> dict:
        """Run a read-only module on the host (also in check mode) and return its result."""
        check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            out = self._execute_module(module_name=module, module_args=args, task_vars=self._vars)
        finally:
            self._task.check_mode = check_mode
        if fail and out.get("failed"):
            raise Invalid(f"{self.role}: reading the host ({module}) failed: {out.get('msg', out)}")
        return out

    def host_command(self, argv: list[str]) -> dict:
        """A read-only command on the host: its rc, stdout and stderr (never fails the task)."""
        return self.on_host("ansible.builtin.command", {"argv": argv}, fail=False)
