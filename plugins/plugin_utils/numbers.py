"""The numeric variables of a role against the ranges its vars/main.yml declares
(__<role>_number_ranges: {variable: [lowest, highest, unit]}), checked before any change, by
the roles' validate actions (check_numbers, in RoleAction.run) and, through the
numbers_in_range filter, by YAML. Argument specs say only "int"; a negative timeout or a million
parallel copies would pass them."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

_WHOLE = re.compile(r"^\s*[+-]?[0-9]+\s*$")


def whole_number_in_range(value: object, name: str, low: int, high: int, unit: str) -> int:
    wanted = f"a whole number of {unit} from {low} to {high}"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise AnsibleFilterError(f"{name}: {wanted}, got {value!r}")
    if isinstance(value, str) and not _WHOLE.match(value):
        raise AnsibleFilterError(f"{name}: {wanted}, got {value!r}")
    number = int(value)
    if not low <= number <= high:
        raise AnsibleFilterError(f"{name}: {wanted}, got {number}")
    return number


def numbers_in_range(values: dict, ranges: dict) -> dict:
    """{variable: value} checked against {variable: [lowest, highest, unit]}; the values as
    integers. A variable without a declared range is an error, so none is left out."""
    checked = {}
    for name, value in values.items():
        if name not in ranges:
            raise AnsibleFilterError(f"{name}: no range declared for this numeric variable")
        low, high, unit = ranges[name]
        checked[name] = whole_number_in_range(value, name, int(low), int(high), str(unit))
    return checked


def check_numbers(variables: dict, ranges: dict) -> dict:
    """Of a role's variables, those with a declared range checked (one not given is None,
    refused); the values as integers."""
    return numbers_in_range({name: variables.get(name) for name in ranges}, ranges)
