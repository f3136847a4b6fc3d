"""Write each role's variable table into docs/roles/<role>.md from the role's
meta/argument_specs.yml, between the two marker lines, and the same options as the role's
documentation fragment, plugins/doc_fragments/<role>_variables.py, when it has validate and
verify actions (their options, as ansible-doc shows them); with --check, change nothing and
exit 1 naming each file that differs from the specs (tests/unit/docs/test_role_variables.py
runs that).

    python3 docs/role_variables.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BEGIN = (
    "<!-- variables: generated from roles/{role}/meta/argument_specs.yml "
    "by docs/role_variables.py -->"
)
END = "<!-- end of variables -->"


def shown(value: object) -> str:
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{json.dumps(value)}`"


def table(role: str) -> str:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, spec in specs["argument_specs"]["main"]["options"].items():
        kind = spec.get("type", "str")
        if spec.get("elements"):
            kind = f"{kind} of {spec['elements']}"
        meaning = " ".join(str(spec.get("description", "")).split())
        if spec.get("choices"):
            meaning += f" One of: {', '.join(str(c) for c in spec['choices'])}."
        default = shown(spec["default"]) if "default" in spec else "required"
        cells = [f"`{name}`", kind, default, meaning]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join([BEGIN.format(role=role), *rows, END])


FRAGMENT = '''# The {role} role's variables as options of its validate and verify actions: generated
# from roles/{role}/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
{options}"""
'''
FRAGMENT_KEYS = ("type", "elements", "default", "choices")


def fragment(role: str) -> str:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = {}
    for name, spec in specs["argument_specs"]["main"]["options"].items():
        meaning = " ".join(str(spec.get("description", "")).split())
        options[name] = {
            "description": meaning,
            **{key: spec[key] for key in FRAGMENT_KEYS if key in spec},
        }
    text = yaml.safe_dump({"options": options}, sort_keys=False, width=88)
    return FRAGMENT.format(role=role, options=text)


def render(page: str, role: str) -> str:
    begin = BEGIN.format(role=role)
    if begin not in page or END not in page:
        raise SystemExit(f"docs/roles/{role}.md: no variable markers ({begin} ... {END})")
    head, rest = page.split(begin, 1)
    tail = rest.split(END, 1)[1]
    return head + table(role) + tail


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    stale = []
    for role in sorted(p.name for p in (REPO / "roles").iterdir()):
        page = REPO / "docs" / "roles" / f"{role}.md"
        generated = {page: render(page.read_text(), role)}
        if (REPO / "plugins" / "action" / f"{role}_validate.py").exists():
            generated[REPO / "plugins" / "doc_fragments" / f"{role}_variables.py"] = fragment(role)
        for path, wanted in generated.items():
            if not path.exists() or path.read_text() != wanted:
                stale.append(str(path.relative_to(REPO)))
                if not check:
                    path.parent.mkdir(exist_ok=True)
                    path.write_text(wanted)
    if check and stale:
        print(f"generated from argument_specs, differing: {', '.join(stale)} "
              "(run: python3 docs/role_variables.py)", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
