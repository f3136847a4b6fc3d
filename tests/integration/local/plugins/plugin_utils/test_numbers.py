"""Each role's validation checks its numeric variables' ranges, run through ansible-playbook on
this machine: one run, a host of its own (this machine) for each role."""

from __future__ import annotations

import pytest

from tests.support.number_ranges import RANGED
from tests.support.role_validation import validate_each_role

ROLES = sorted({role for role, _ in RANGED.values()})


def first_ranged(role: str) -> tuple[str, int]:
    """The role's first numeric variable with a range, and the range's low end."""
    name, (low, _, _) = next((n, spec) for n, (r, spec) in RANGED.items() if r == role)
    return name, low


@pytest.fixture(scope="module")
def out_of_range(tmp_path_factory) -> dict[str, list[dict]]:
    """Each role validated with its first ranged variable 6 below the range."""
    variables_of = {}
    for role in ROLES:
        name, low = first_ranged(role)
        variables_of[role] = {name: low - 6}
    return validate_each_role(variables_of, tmp_path_factory.mktemp("ranges"))


@pytest.mark.parametrize("role", ROLES)
def test_each_roles_validation_checks_its_ranges(role, out_of_range):
    """The role's validate tasks stop at one out-of-range value, naming it, changing nothing."""
    name, _ = first_ranged(role)
    (failed,) = out_of_range[role]
    assert failed["failed"] is True, failed
    assert f"{name}: a whole number of" in failed["msg"], failed["msg"]
    assert not failed.get("changed"), failed
