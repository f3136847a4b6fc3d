"""The documentation: role variable tables generated from argument_specs and kept in step with
them, a README a newcomer reads in five minutes that opens with the two commands, and links
that stay inside the repository (no address, no path above its root) and lead somewhere."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from tests.paths import CHECKOUT as REPO

PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def load_generator(repo: Path):
    spec = importlib.util.spec_from_file_location("role_variables", repo / "docs/role_variables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_role_tables_match_argument_specs():
    assert load_generator(REPO).main(["--check"]) == 0


def test_a_spec_change_makes_the_check_fail(tmp_path, capsys):
    copy = tmp_path / "repo"
    for part in ("roles", "docs"):
        shutil.copytree(REPO / part, copy / part)
    specs = copy / "roles/shm/meta/argument_specs.yml"
    specs.write_text(specs.read_text().replace("Apply this role at all.", "Apply it."))
    generator = load_generator(copy)
    assert generator.main(["--check"]) == 1
    assert "docs/roles/shm.md" in capsys.readouterr().err
    assert generator.main([]) == 0 and generator.main(["--check"]) == 0
    assert "| Apply it. |" in (copy / "docs/roles/shm.md").read_text()


def test_every_role_has_a_page():
    roles = {p.name for p in (REPO / "roles").iterdir()}
    assert roles == {p.stem for p in (REPO / "docs/roles").glob("*.md")}


def test_the_readme_is_short_and_opens_with_the_two_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    opening = "\n".join(lines[:6])
    assert "make demo" in opening and "make test" in opening


def slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, code = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            code = not code
        elif not code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_links_stay_inside_the_repository_and_lead_somewhere(page):
    for target in LINK.findall(page.read_text()):
        assert not re.match(r"^[a-z]+:", target), f"{page.name}: {target} leaves the repository"
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target} leads nowhere"
        assert REPO in resolved.parents or resolved == REPO, f"{page.name}: {target} is outside"
        if anchor:
            assert anchor in anchors(resolved), f"{page.name}: no heading for #{anchor}"
