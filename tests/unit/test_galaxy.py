"""The collection's metadata agrees with itself and with the Python package: one version, the
dependencies galaxy.yml declares are the ones requirements.yml names and the roles use, every
plugin a role names by its full name exists, and nothing reaches outside the collection."""

from __future__ import annotations

import importlib
import re

import yaml

import hostcheck
from tests.paths import CHECKOUT as REPO

GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
PREFIX = f"{GALAXY['namespace']}.{GALAXY['name']}."
ANSIBLE_FILES = [
    path
    for folder in ("roles", "playbooks")
    for path in sorted((REPO / folder).rglob("*"))
    if path.suffix in (".yml", ".j2")
]
FQCN = re.compile(r"\b([a-z_]+)\.([a-z_]+)\.([a-z_]+)\b")


def used_names() -> set[tuple[str, str, str]]:
    found = set()
    for path in ANSIBLE_FILES:
        text = path.read_text()
        found |= {m.groups() for m in FQCN.finditer(text)}
    return found


def test_one_version_for_package_collection_and_role_default():
    defaults = yaml.safe_load((REPO / "roles/hostcheck/defaults/main.yml").read_text())
    specs = yaml.safe_load((REPO / "roles/hostcheck/meta/argument_specs.yml").read_text())
    spec_default = specs["argument_specs"]["main"]["options"]["hostcheck_wheel"]["default"]
    assert GALAXY["version"] == hostcheck.__version__
    assert defaults["hostcheck_wheel"] == f"hostcheck[node]=={hostcheck.__version__}"
    assert spec_default == defaults["hostcheck_wheel"]
    assert 'dynamic = ["version"]' in (REPO / "pyproject.toml").read_text()


def test_requirements_name_exactly_the_declared_dependencies():
    wanted = yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]
    assert {entry["name"]: entry["version"] for entry in wanted} == GALAXY["dependencies"]


def test_every_collection_the_roles_use_is_a_dependency():
    used = {f"{ns}.{coll}" for ns, coll, _ in used_names()}
    own = PREFIX.rstrip(".")
    collections = {name for name in used if name.split(".")[0] in ("ansible", "community")}
    assert collections - {"ansible.builtin"} == set(GALAXY["dependencies"])
    assert own in used


def test_every_plugin_named_by_its_full_name_exists():
    namespace, name = GALAXY["namespace"], GALAXY["name"]
    filters = set()
    for path in (REPO / "plugins/filter").glob("*.py"):
        filters |= set(
            importlib.import_module(
                f"ansible_collections.hostcheck.gpu_hosts.plugins.filter.{path.stem}"
            )
            .FilterModule()
            .filters()
        )
    modules = {p.stem for p in (REPO / "plugins/modules").glob("*.py")}
    actions = {p.stem for p in (REPO / "plugins/action").glob("*.py")}
    roles = {p.name for p in (REPO / "roles").iterdir()}
    playbooks = {p.stem for p in (REPO / "playbooks").glob("*.yml")}
    ours = {plugin for ns, coll, plugin in used_names() if (ns, coll) == (namespace, name)}
    unknown = ours - filters - modules - actions - roles - playbooks
    assert not unknown, f"{PREFIX}* names that the collection does not have: {sorted(unknown)}"
    assert {"site", "provision", "verify", "audit", "stage_dataset", "repair"} <= playbooks


def test_no_role_or_playbook_reaches_outside_the_collection():
    reaching = re.compile(r"role_path\s*\|\s*dirname\s*\|\s*dirname|role_path\s*\}\}/\.\.|"
                          r"playbook_dir\s*\|\s*dirname")  # fmt: skip
    offenders = [
        str(path.relative_to(REPO)) for path in ANSIBLE_FILES if reaching.search(path.read_text())
    ]
    assert offenders == []


def test_runtime_and_build_ignore():
    runtime = yaml.safe_load((REPO / "meta/runtime.yml").read_text())
    assert runtime["requires_ansible"].startswith(">=2.")
    ignored = set(GALAXY["build_ignore"])
    assert {"hostcheck", "tests", "benchmarks", ".cache", ".venv", "ansible.cfg"} <= ignored


def test_every_python_package_of_hostcheck_is_in_the_wheel():
    """A folder with __init__.py that pyproject.toml does not list is missing from the wheel
    (the hostcheck role installs the wheel, not this checkout)."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "hostcheck").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set()


def test_plugin_code_is_imported_under_one_name():
    """As Ansible loads it (ansible_collections.hostcheck.gpu_hosts.plugins...), never as the
    checkout's `plugins` folder: one module object, so one Invalid class, one cache."""
    pattern = re.compile(r"^\s*(from|import) plugins\b", re.MULTILINE)
    sources = [
        *REPO.glob("tests/**/*.py"),
        *REPO.glob("plugins/**/*.py"),
        *REPO.glob("benchmarks/*.py"),
    ]
    offenders = [
        str(path.relative_to(REPO)) for path in sources if pattern.search(path.read_text())
    ]
    assert offenders == []
