"""Every numeric role variable has its range checked before any change: a table over all
roles' numeric variables (negative, zero where meaningless, absurdly large, not a number), each
refused with a message naming the variable, and each role's validation run for real on this
machine with one bad value."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import numbers_in_range
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    ulimits_conf_value,
)

from tests.paths import CHECKOUT as REPO
from tests.support.number_ranges import RANGED, ROLES, ranges

# Variables that take a number or a word ('unlimited'); plugin_utils/ulimits_rules.py checks them.
ULIMITS = [f"ulimits_{item}_{kind}" for item in ("nofile", "memlock", "nproc")
           for kind in ("soft", "hard")]  # fmt: skip


def options(role: str) -> dict:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"]


NUMERIC = sorted(
    (role, name)
    for role in ROLES
    for name, spec in options(role).items()
    if spec.get("type") in ("int", "float")
)


def refuse(name: str, value: object) -> str:
    """The message the role's own checker gives for `value`, or '' when it is accepted."""
    try:
        if name in ULIMITS:
            ulimits_conf_value(value, name, name.split("_")[1])
        else:
            role, _ = RANGED[name]
            numbers_in_range({name: value}, ranges(role))
    except AnsibleFilterError as exc:
        return str(exc)
    return ""


def test_every_numeric_variable_has_a_declared_range():
    assert NUMERIC, "no numeric variables found: the scan is broken"
    assert [name for _, name in NUMERIC if name not in RANGED] == []
    assert set(RANGED) == {name for _, name in NUMERIC}  # no range for a variable that is gone


def bad_values(name: str) -> list[object]:
    if name in ULIMITS:
        return [-5, 0, 10**30, "lots", True]
    low, high, _ = RANGED[name][1]
    values = [-5, high + 1, 10**12, "abc", True, 1.5]
    if low > 0:
        values.append(0)
    return values


TABLE = [(name, value) for name in sorted([*RANGED, *ULIMITS]) for value in bad_values(name)]


@pytest.mark.parametrize(("name", "value"), TABLE, ids=[f"{n}={v!r}" for n, v in TABLE])
def test_a_bad_value_is_refused_naming_the_variable(name, value):
    message = refuse(name, value)
    assert message.startswith(f"{name}:"), message


@pytest.mark.parametrize("name", sorted(RANGED))
def test_the_ends_of_each_range_are_accepted(name):
    low, high, _ = RANGED[name][1]
    assert refuse(name, low) == refuse(name, high) == refuse(name, str(high)) == ""
