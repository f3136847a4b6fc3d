"""The base of a role's `<role>_validate` and `<role>_verify` actions: the task passes the
role's variables as arguments, named as the variables (the role's vars/main.yml lists them once,
as __<role>_arguments, and module_defaults gives them to the role's action group), and the
action says what it decided.

    - name: Validate the variables
      hostcheck.gpu_hosts.shm_validate:
        validated: "{{ __shm_validation | default({}) }}"
      module_defaults:
        group/hostcheck.gpu_hosts.shm: "{{ __shm_arguments }}"  # shm_size: "{{ shm_size }}" ...
      register: __shm_validation

The arguments are checked against the role's meta/argument_specs.yml (entry point main, the
spec Ansible checks before main.yml), so a boolean given as `-e shm_enabled=true` arrives as a
bool and a bad value fails here, before any role changes anything, naming the variable. The
action reads no other variable; of the host it reads its facts (gathering the `min` subset when
the play did not) and what its probe module returns.

Besides the role's variables a task may pass the role's own constants (vars/main.yml: the
files it manages, a header line), named by the action's INTERNAL spec and documented with the
rest. READING names those of them that only reading the host uses (a tuple of INTERNAL's names,
results registered later in the run): they are taken out of self.args before the digest and
the checks, and given as self.reading; every other INTERNAL option stays in self.args. When
INTERNAL has number_ranges (the role's __<role>_number_ranges: {variable: [lowest, highest,
unit]}), the numeric variables are checked against it before validate(), which reads them as
integers; a value out of range fails the task naming the variable.

Per-OS values are what the role's tasks/validate.yml loaded with include_vars and first_found
(the first of vars/<distribution>-<major>.yml, <distribution>.yml, <os_family>-<major>.yml,
<os_family>.yml) into __<role>_os_vars_loaded; os_vars() fills in `{fact}` in their strings
with the host's fact.

Result: `values` (what the role's tasks use, documented in the action's plugins/modules file),
`digest` (of the arguments) and `msg`. `validated` is this task's own earlier result in the run:
when its digest matches, its values are returned again without reading the host, so
playbooks/provision.yml's validation of every role, then main.yml and verify.yml, read the host
once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import ClassVar

import yaml
from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import check_numbers
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.platforms import (
    platform_of,
    problem,
)

ROLES = Path(__file__).resolve().parents[2] / "roles"
VALIDATED = {"validated": {"type": "dict", "default": {}}}
# Every task's worker parses its role's argument specs anew: libyaml's parser where PyYAML has it
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
FACT_FIELD = re.compile(r"\{(\w+)\}")


class Invalid(Exception):
    """A variable, or what it names on the host, is wrong: the one-line message says which."""


@functools.cache
def role_meta(role: str, name: str) -> dict:
    """roles/<role>/meta/<name>.yml of this collection."""
    with open(ROLES / role / "meta" / f"{name}.yml") as handle:
        return yaml.load(handle, Loader=SAFE_LOADER) or {}


def argument_spec(role: str, internal: dict | None = None) -> dict:
    """The options of the role's main entry point, the action's INTERNAL ones, `validated`."""
    options = role_meta(role, "argument_specs")["argument_specs"]["main"]["options"]
    return {**options, **(internal or {}), **VALIDATED}


def with_facts(value: object, facts: dict) -> object:
    """Strings of a vars file with each {name} that is a fact filled in (other braces kept),
    through lists and dicts."""
    if isinstance(value, str):
        return FACT_FIELD.sub(lambda m: str(facts.get(m[1], m[0])), value)
    if isinstance(value, list):
        return [with_facts(item, facts) for item in value]
    if isinstance(value, dict):
        return {key: with_facts(item, facts) for key, item in value.items()}
    return value


def one_choice(value: object) -> bool:
    """False for what a spec's choices take besides one of them: a list (each item checked
    against the choices) and a number that equals true or false."""
    if isinstance(value, list):
        return False
    return isinstance(value, bool) or not isinstance(value, (int, float)) or value not in (0, 1)


class RoleAction(ActionBase):
    TRANSFERS_FILES = False
    # the role whose variables are the arguments (shm: shm_enabled, shm_size ...)
    ROLE = ""
    # False: validate (and read the host) every time, never returning an earlier result; for a
    # role whose tasks act on the live state its validation reads.
    REUSE = True
    # What the role leaves alone when <role>_enabled is false ({variable} of the arguments are
    # filled in); said instead of validating what it would have used.
    SWITCHED_OFF = "left as it is"
    # True for a `<role>_verify` action: after validating it compares the host with the values.
    VERIFIES = False
    # False: when <role>_enabled is false only the argument spec is checked, not the numbers'
    # ranges, and validate() is not called (the values are {}).
    CHECKS_WHEN_OFF = True
    # Arguments that are the role's own constants (vars/main.yml), not user variables:
    # {name: argument spec}, documented with the others.
    INTERNAL: ClassVar[dict] = {}
    # Names of INTERNAL options only reading the host uses (results registered later in the
    # run): kept out of the digest, so such a task gets the validation's result again, and
    # given as self.reading instead of self.args.
    READING: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        reading = cls.READING
        if not isinstance(reading, tuple) or not all(isinstance(name, str) for name in reading):
            raise TypeError(
                f"{cls.__module__}.{cls.__name__}.READING: a tuple of names of INTERNAL options, "
                f"got {reading!r}"
            )
        unknown = [name for name in reading if name not in cls.INTERNAL]
        if unknown:
            raise TypeError(
                f"{cls.__module__}.{cls.__name__}.READING names {unknown}, not options of INTERNAL"
            )

    def validate(self) -> dict:
        """The role's checks of self.args; raise Invalid. Returns what the role's tasks use."""
        raise NotImplementedError

    def verify(self, values: dict) -> list[str]:
        """A verify action's comparison of the host with the validated values: the lines that
        say what holds; raise Invalid (one message for every mismatch) when not."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the run

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        self.host_facts = dict((task_vars or {}).get("ansible_facts") or {})
        self.task_vars = task_vars or {}
        self.host = str(self.task_vars.get("inventory_hostname", "this host"))
        self.notes: list[str] = []
        self.gathered: dict = {}
        try:
            earlier = self.take_arguments()
            digest = hashlib.sha256(
                json.dumps(self.args, sort_keys=True, default=str).encode()
            ).hexdigest()
            enabled = self.enabled()
            if self.REUSE and earlier.get("digest") == digest and "values" in earlier:
                values = earlier["values"]
                said = f"{self.ROLE}: validated earlier in this run"
            else:
                if enabled:
                    self.check_platform()
                elif not self.VERIFIES:
                    self.note(f"{self.ROLE}_enabled is false: {self.switched_off()}")
                values = {}
                if enabled or self.CHECKS_WHEN_OFF:
                    self.check_number_ranges()
                    values = self.validate() or {}
                said = f"{self.ROLE}: the variables are valid"
            if not enabled and self.VERIFIES:
                said = f"{self.ROLE}_enabled is false: {self.switched_off()}"
            elif self.VERIFIES:
                said = "; ".join(self.verify(values))
        except (Invalid, AnsibleError) as exc:
            result.update(failed=True, msg=str(exc).strip())
            return result
        # a validation's notes replace "the variables are valid", a verification's come first
        said_all = [*self.notes, said] if self.VERIFIES or not self.notes else self.notes
        result.update(values=values, digest=digest, msg="; ".join(said_all))
        if self.notes:
            result["_ansible_verbose_always"] = True  # shown without -v
        if self.gathered:
            result["ansible_facts"] = self.gathered
        return result

    def take_arguments(self) -> dict:
        """self.args (checked_arguments()) and self.reading (READING's, taken out of self.args);
        returns `validated`, taken out too."""
        self.args = self.checked_arguments()
        self.reading = {name: self.args.pop(name) for name in self.READING}
        return self.args.pop("validated")

    def checked_arguments(self) -> dict:
        """The task's arguments checked and converted by the role's argument spec: types,
        choices, list elements, required options, so the role's checks start from values of
        the right kind. Two of its conversions lose what the user meant, so for the role's
        variables they are refused instead: a number with a fraction where text is wanted (YAML
        read 12.10 as 12.1), and text where a mapping is wanted (`-e settings=a=1` would replace
        every entry with one). Where its choices let more through than one of them, so do the
        variables of type raw: a list of choices, and 1 or 0 for true or false."""
        spec = argument_spec(self.ROLE, self.INTERNAL)
        given = dict(self._task.args)
        variables = argument_spec(self.ROLE)
        for name, value in given.items():
            option = variables.get(name, {}) if name != "validated" else {}
            wanted = option.get("type")
            if wanted == "raw" and "choices" in option and not one_choice(value):
                choices = ", ".join(str(choice) for choice in option["choices"])
                raise Invalid(
                    f"{self.ROLE}: validation of arguments failed: value of {name} must be one "
                    f"of: {choices}, got: {value}"
                )
            if isinstance(value, float) and wanted == "str":
                raise Invalid(
                    f"{name}: text, quoted (unquoted, YAML reads 12.10 as the number 12.1); "
                    f"got {value}"
                )
            if isinstance(value, str) and wanted == "dict":
                raise Invalid(
                    f"{name}: a mapping (YAML, or JSON with -e), got the text {json.dumps(value)}"
                )
        checked = ArgumentSpecValidator(spec).validate(given, validate_role_argument_spec=True)
        if checked.error_messages:
            raise Invalid(
                f"{self.ROLE}: validation of arguments failed: " + "; ".join(checked.error_messages)
            )
        return dict(checked.validated_parameters)

    def check_number_ranges(self) -> None:
        """When INTERNAL has number_ranges: the numeric variables it names checked against
        their ranges (the message names the first one out of range), as integers in self.args."""
        if "number_ranges" in self.INTERNAL:
            self.args.update(check_numbers(self.args, self.args["number_ranges"]))

    def switched_off(self) -> str:
        if self.VERIFIES:
            return "not verified"
        return self.SWITCHED_OFF.format(**self.args)

    # ------------------------------------------------------------------ for the checks

    def arg(self, name: str):
        """An argument by its variable's name (shm_size)."""
        return self.args[name]

    def enabled(self) -> bool:
        return bool(self.args[f"{self.ROLE}_enabled"])

    def note(self, message: str) -> None:
        """Something the operator should read, not an error (shown as the task's message)."""
        self.notes.append(message)

    def facts(self) -> dict:
        """The host's distribution and kernel facts, gathered (subset min) if the play did not."""
        facts = {
            **self.host_facts,
            **{key.removeprefix("ansible_"): fact for key, fact in self.gathered.items()},
        }
        if "os_family" in facts and "kernel" in facts:
            return facts
        gathered = self._execute_module(
            module_name="ansible.builtin.setup",
            module_args={"gather_subset": ["min"]},
            task_vars=self.task_vars,
        )
        if gathered.get("failed"):
            raise Invalid(f"{self.ROLE}: gathering the host's facts failed: {gathered.get('msg')}")
        for key, fact in gathered.get("ansible_facts", {}).items():
            self.gathered[key] = fact
            facts[key.removeprefix("ansible_")] = fact
        return facts

    def check_platform(self) -> None:
        platforms = role_meta(self.ROLE, "main")["galaxy_info"]["platforms"]
        reason = problem(self.facts(), platforms, self.ROLE)
        if reason:
            raise Invalid(reason)

    def platform(self) -> tuple[str, str]:
        return platform_of(self.facts())

    def os_vars(self, *, required: bool = False) -> dict:
        """The role's per-OS values, as tasks/validate.yml's include_vars task loaded them
        (__<role>_os_vars_loaded), {fact} filled in; required: Invalid naming <role>_enabled
        when none are loaded (no vars file for this OS, or validate.yml did not run first)."""
        loaded = self.task_vars.get(f"__{self.ROLE}_os_vars_loaded")
        if isinstance(loaded, dict):
            return with_facts(dict(loaded), self.facts())
        if required:
            facts = self.facts()
            raise Invalid(
                f"{self.ROLE}_enabled: no vars file in roles/{self.ROLE}/vars loaded for "
                f"{facts.get('distribution')} {facts.get('distribution_version')} (the role's "
                "tasks/validate.yml loads it, before this task)"
            )
        return {}

    def role_file(self, name: str) -> str:
        """The text of roles/<role>/files/<name> (a script a probe runs)."""
        return (ROLES / self.ROLE / "files" / name).read_text()

    def on_host(self, module: str, args: dict, *, fail: bool = True) -> dict:
        """Run a read-only module on the host and return its result; the module supports check
        mode, so this reads the host in a --check run too. fail: Invalid when it failed."""
        out = self._execute_module(module_name=module, module_args=args, task_vars=self.task_vars)
        if fail and out.get("failed"):
            raise Invalid(f"{self.ROLE}: reading the host ({module}) failed: {out.get('msg', out)}")
        return out

    def host_command(self, argv: list[str], stdin: str | None = None) -> dict:
        """A read-only command on the host (plugins/modules/host_read.py, in check mode too): its
        rc, stdout and stderr; never fails the task."""
        args = {"argv": argv, **({"stdin": stdin} if stdin is not None else {})}
        return self.on_host("hostcheck.gpu_hosts.host_read", args, fail=False)
