"""The roles' numeric variables with a declared range (`__<role>_number_ranges` in the role's
vars/main.yml), for the range table and the runs of each role's validation."""

import yaml

from tests.paths import CHECKOUT as REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir())


def ranges(role: str) -> dict:
    path = REPO / "roles" / role / "vars" / "main.yml"
    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    return (data or {}).get(f"__{role}_number_ranges", {})


RANGED = {name: (role, spec) for role in ROLES for name, spec in ranges(role).items()}
