"""The contract of a role's validate action through ansible-playbook on this machine: booleans
given on the command line, and switches that are no boolean refused by name."""

from __future__ import annotations

import pytest
import yaml

from tests.paths import CHECKOUT as REPO
from tests.support.role_validation import validate, validate_each_role


def switches() -> dict[str, list[str]]:
    """role -> its boolean variables (the argument spec's type bool)."""
    found = {}
    for spec in sorted((REPO / "roles").glob("*/meta/argument_specs.yml")):
        options = yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]
        found[spec.parts[-3]] = [name for name, o in options.items() if o.get("type") == "bool"]
    return found


@pytest.mark.parametrize("text", ["true", "yes", "1", "True"])
def test_a_boolean_from_the_command_line_is_a_boolean(tmp_path, text):
    """-e shm_enabled=true gives the string 'true': converted as Ansible's specs convert it."""
    (first,) = validate("shm", {"shm_enabled": text, "shm_size": "150%"}, tmp_path)
    assert first["msg"].startswith("shm_size: a percentage of RAM")  # validated as enabled


def test_a_boolean_it_cannot_read_is_refused_by_name(tmp_path):
    (failed,) = validate("shm", {"shm_refuse_shrink_below_used": "sometimes"}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"].startswith("shm: validation of arguments failed: ")
    assert "shm_refuse_shrink_below_used" in failed["msg"]


SWITCHED = sorted(role for role, names in switches().items() if names)
IN_YAML = "slurm_healthcheck"  # validates in YAML (assert tasks), not in an action


@pytest.fixture(scope="module")
def no_booleans(tmp_path_factory) -> dict[str, list[dict]]:
    """Each role (a host of one run) validated with every switch set to 'sometimes'."""
    variables_of = {
        role: dict.fromkeys(switches()[role], "sometimes") for role in SWITCHED if role != IN_YAML
    }
    return validate_each_role(variables_of, tmp_path_factory.mktemp("switches"))


@pytest.mark.parametrize("role", SWITCHED)
def test_every_switch_that_is_no_boolean_is_refused_by_name(no_booleans, role):
    """One rule for booleans in every role: Ansible's (true, yes, 1, on ... as strings too);
    anything else stops the validation, naming each variable."""
    names = switches()[role]
    if role == IN_YAML:
        pytest.skip("slurm_healthcheck validates in YAML (assert tasks), not in an action")
    (failed,) = no_booleans[role]
    assert failed["failed"] is True
    assert failed["msg"].startswith(f"{role}: validation of arguments failed: ")
    for name in names:
        assert f"argument '{name}'" in failed["msg"], name
