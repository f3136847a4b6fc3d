"""Every numeric role variable has its range checked before any change: a table over all
roles' numeric variables (negative, zero where meaningless, absurdly large, not a number), each
refused with a message naming the variable, and each role's validation run for real on this
machine with one bad value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import numbers_in_range
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    ulimits_conf_value,
)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROLES = sorted(p.name for p in (REPO / "roles").iterdir())
# Variables that take a number or a word ('unlimited'); plugin_utils/ulimits_rules.py checks them.
ULIMITS = [f"ulimits_{item}_{kind}" for item in ("nofile", "memlock", "nproc")
           for kind in ("soft", "hard")]  # fmt: skip


def options(role: str) -> dict:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"]


def ranges(role: str) -> dict:
    path = REPO / "roles" / role / "vars" / "main.yml"
    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    return (data or {}).get(f"__{role}_number_ranges", {})


NUMERIC = sorted(
    (role, name)
    for role in ROLES
    for name, spec in options(role).items()
    if spec.get("type") in ("int", "float")
)
RANGED = {name: (role, spec) for role in ROLES for name, spec in ranges(role).items()}


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


@pytest.mark.parametrize("role", sorted({role for role, _ in RANGED.values()}))
def test_each_roles_validation_checks_its_ranges(role, tmp_path):
    """The role's validate tasks, run on this machine, stop at one out-of-range value."""
    name, (low, _, _) = next((n, spec) for n, (r, spec) in RANGED.items() if r == role)
    book = tmp_path / "validate.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: true\n  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        f"        name: hostcheck.gpu_hosts.{role}\n        tasks_from: validate\n"
    )
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book),
         "-e", json.dumps({name: low - 6, "ansible_python_interpreter": sys.executable})],
        cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
             "PATH": f"{BIN}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[-3000:]
    assert f"{name}: a whole number of" in done.stdout, done.stdout[-3000:]
    assert "changed=0" in done.stdout
