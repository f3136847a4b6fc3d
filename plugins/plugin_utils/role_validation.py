"""One task that validates a role: its variables, then (read-only) what they point at on the host.

Each role's validate.yml is one task of the role's `<role>_validate` action, registered as
`__<role>_validation`:

    - name: Validate the variables and what they point at (changes nothing)
      hostcheck.gpu_hosts.shm_validate:
      register: __shm_validation

The action templates every `<role>_*` variable, runs the role's checks (a subclass's
`validate()`), and returns what the role's tasks use under `values`. playbooks/provision.yml
validates every role before any role changes anything; when main.yml or verify.yml validates
again in the same run, the earlier result is returned unless a variable changed since (a
digest of them all is kept), so a role costs one task there and the host is read once.
Registered results live for one run only, unlike facts, which a fact cache would carry over.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

import yaml
from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.hostcheck.gpu_hosts.plugins.action.role_platform_check import (
    platform_of,
    problem,
)


class Invalid(Exception):
    """A variable, or what it names on the host, is wrong: the one-line message says which."""


class RoleValidation(ActionBase):
    TRANSFERS_FILES = False
    # False: validate (and read the host) every time, never returning an earlier result; for
    # a role whose tasks act on the live state its validation reads (sysctl_tuning).
    REUSE = True
    # What the role leaves alone when <role>_enabled is false ({variable} of the role's
    # variables are filled in); said instead of validating what it would have used.
    SWITCHED_OFF = "left as it is"
    # True for a role's `<role>_verify` action: after validating it compares the host with
    # the values (verify()); verify.yml is that one task.
    VERIFIES = False

    def validate(self) -> dict:
        """The role's checks; raise Invalid. Returns the values the role's tasks use."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the run

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        self._vars = task_vars or {}
        self.role = self._task._role.get_name(include_role_fqcn=False)
        self.role_path = self._task._role._role_path
        self.notes: list[str] = []
        self.gathered: dict = {}
        try:
            self.given = {
                name: self.value(name)
                for name in sorted(self._vars)
                if name.startswith(f"{self.role}_")
            }
            digest = hashlib.sha256(
                json.dumps(self.given, sort_keys=True, default=str).encode()
            ).hexdigest()
            earlier = self._vars.get(f"__{self.role}_validation")
            enabled = self.enabled()
            if (
                self.REUSE
                and isinstance(earlier, Mapping)
                and earlier.get("digest") == digest
                and "values" in earlier
                and not earlier.get("failed")
            ):
                values = earlier["values"]
                said = f"{self.role}: validated earlier in this run"
            else:
                self.check_argument_spec()
                if enabled:
                    self.check_platform()
                elif not self.VERIFIES:
                    self.note(f"{self.role}_enabled is false: {self.switched_off()}")
                values = self.validate() or {}
                said = f"{self.role}: the variables are valid"
            if not enabled and self.VERIFIES:
                said = f"{self.role}_enabled is false: {self.switched_off()}"
            elif self.VERIFIES:
                said = "; ".join(self.verify(values))
        except (Invalid, AnsibleError) as exc:
            result.update(failed=True, msg=str(exc).strip())
            return result
        # a validation's notes replace "the variables are valid", a verification's come first
        said_all = [*self.notes, said] if self.VERIFIES or not self.notes else self.notes
        result.update(values=values, digest=digest, msg="; ".join(said_all))
        if self.notes:
            # shown without -v, as the debug tasks that said these were
            result["_ansible_verbose_always"] = True
        if self.gathered:
            result["ansible_facts"] = self.gathered
        return result

    def switched_off(self) -> str:
        """What `<role>_enabled: false` leaves alone (the role's SWITCHED_OFF, or, when this
        action verifies, that nothing is verified)."""
        if self.VERIFIES:
            return "not verified"
        return self.SWITCHED_OFF.format(**self.given)

    def verify(self, values: dict) -> list[str]:
        """A `<role>_verify` action's comparison of the host with the validated values: the
        lines that say what holds; raise Invalid (one message for every mismatch) when not."""
        raise NotImplementedError

    # ------------------------------------------------------------------ for the checks

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

    def enabled(self) -> bool:
        flag = self.var(f"{self.role}_enabled")
        return flag is True or str(flag).lower() in ("true", "yes", "on", "1")

    def note(self, message: str) -> None:
        """Something the operator should read, not an error (shown as the task's message)."""
        self.notes.append(message)

    def facts(self) -> dict:
        """The host's distribution and kernel facts, gathered (subset min) if the play did not."""
        facts = dict(self._vars.get("ansible_facts") or {})
        facts.update(self.gathered)
        if "os_family" in facts and "kernel" in facts:
            return facts
        gathered = self._execute_module(
            module_name="ansible.builtin.setup",
            module_args={"gather_subset": ["min"]},
            task_vars=self._vars,
        )
        if gathered.get("failed"):
            raise Invalid(f"{self.role}: gathering the host's facts failed: {gathered.get('msg')}")
        for key, fact in gathered.get("ansible_facts", {}).items():
            self.gathered[key] = fact
            facts[key.removeprefix("ansible_")] = fact
        return facts

    def check_argument_spec(self) -> None:
        """The role's meta/argument_specs.yml (entry point main), as Ansible checks it before
        main.yml: here before the role's own checks, also when only validate.yml runs."""
        path = os.path.join(self.role_path, "meta", "argument_specs.yml")
        if not os.path.isfile(path):
            return
        with open(path) as handle:
            spec = (yaml.safe_load(handle) or {}).get("argument_specs", {}).get("main", {})
        options = spec.get("options") or {}
        given = {name: self.given[name] for name in options if name in self.given}
        checked = ArgumentSpecValidator(options).validate(given, validate_role_argument_spec=True)
        if checked.error_messages:
            raise Invalid(
                f"{self.role}: validation of arguments failed: " + "; ".join(checked.error_messages)
            )

    def check_platform(self) -> None:
        with open(os.path.join(self.role_path, "meta", "main.yml")) as handle:
            platforms = yaml.safe_load(handle)["galaxy_info"]["platforms"]
        reason = problem(self.facts(), platforms, self.role)
        if reason:
            raise Invalid(reason)

    def platform(self) -> tuple[str, str]:
        return platform_of(self.facts())

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
