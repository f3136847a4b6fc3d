"""Every role variable a hostcheck remedy tells people to set exists in that role's
argument_specs: the remedies are read from hostcheck's source (each string that names a role,
and the variable names handed to remedy templates), the variables from roles/*/meta."""

from __future__ import annotations

import ast
import re

import pytest
import yaml
from hostcheck._shared import limits_text

from tests.paths import CHECKOUT as REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir())
# Longest first: sysctl_tuning_x is a sysctl_tuning variable, not a "sysctl" one.
TOKEN = re.compile(r"\b(" + "|".join(sorted(ROLES, key=len, reverse=True)) + r")_[a-z0-9_]+\b")
# Prefixes whose bare names in hostcheck are always role variables (shm_* and hostcheck_* are
# also finding and metric names, so those count only inside a remedy's text).
BARE = tuple(f"{role}_" for role in ROLES if role not in ("shm", "hostcheck"))


def role_options(role: str) -> set[str]:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return set(specs["argument_specs"]["main"]["options"])


def named_in_remedies() -> dict[str, set[str]]:
    """variable -> the files whose remedies name it"""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "hostcheck").rglob("*.py")):
        source = path.read_text()
        if not TOKEN.search(source):
            continue  # no string in it can name a role variable; parsing it costs collection
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            if "role " in text or "(role" in text:
                tokens = {m.group(0) for m in TOKEN.finditer(text)}
            elif TOKEN.fullmatch(text) and text.startswith(BARE) and not text.endswith("_"):
                tokens = {text}
            else:
                continue
            for token in tokens:
                found.setdefault(token, set()).add(str(path.relative_to(REPO)))
    # the ulimits check fills its remedies with ulimits_<item>_<kind> of the failing values
    for item in limits_text.ITEMS:
        for kind in limits_text.KINDS:
            found.setdefault(f"ulimits_{item}_{kind}", set()).add("hostcheck/checks/ulimits.py")
    return found


REMEDY_VARIABLES = named_in_remedies()


def test_the_scan_finds_the_remedies():
    assert {"shm_size", "nvidia_driver_branch", "pillow_simd_avx2", "ulimits_users"} <= set(
        REMEDY_VARIABLES
    )
    assert len(REMEDY_VARIABLES) >= 15


@pytest.mark.parametrize("variable", sorted(REMEDY_VARIABLES))
def test_the_variable_exists_in_its_roles_argument_specs(variable):
    role = TOKEN.match(variable).group(1)
    assert variable in role_options(role), (
        f"{variable} is named by remedies in {sorted(REMEDY_VARIABLES[variable])} "
        f"but role {role} has no such variable"
    )


def test_the_package_knows_every_role_and_finds_the_variables_a_remedy_names():
    from hostcheck.remedies import ROLES as KNOWN
    from hostcheck.remedies import role_variables

    assert sorted(KNOWN) == ROLES
    remedy = (
        "set sysctl_tuning_settings['vm.swappiness'] (role sysctl_tuning) and run: "
        "ansible-playbook site.yml --tags sysctl_tuning; set shm_size (role shm) and run: ..."
    )
    assert role_variables(remedy) == ["sysctl_tuning_settings", "shm_size"]
    assert role_variables("find what fills /dev/shm (stale segments: shm_x)") == []
