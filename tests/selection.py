"""Which integration test modules a change needs, as ansible-test's `--changed` picks targets.

Each integration module names the paths it covers in a module-level COVERS tuple (shell
patterns over the checkout's tracked paths, `*` crossing `/`). The gate (GATE_MODULES: the unit
tests, the local integration tests, the collection with ansible-test sanity, the smoke converge)
runs on every change, except the unit modules that declare COVERS themselves (those that run
real jobs and measure them against arithmetic: minutes of CPU, selected like integration
modules) and those that declare READS: the paths whose change runs them, claiming none (the
lint of the Ansible content reads every role, so it must not make a new role's path claimed).
The change is what differs from the last commit at which the whole suite passed, recorded in
tests/full_pass.json, so every clean clone selects the same modules:

- a path the gate alone covers (GATE_PATHS: docs, unit tests, benchmarks) selects nothing more;
- a path some modules claim selects those modules;
- a path of the harness every module stands on (EVERYTHING), a path no module claims, or a
  record that cannot be read selects every module.

    python -m tests.selection                # what `make test` runs, and why
    python -m tests.selection record         # tests/full_pass.json from the newest ledger of a
                                             # passing `make test-all` at a clean HEAD
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from tests import costs
from tests.paths import CHECKOUT

RECORD = CHECKOUT / "tests" / "full_pass.json"
# The run's selection, set by tests/conftest.py for its workers and fixtures: "all", "changed"
# (make test's) or "some" (a path, -k or -m).
MODE_ENVIRONMENT = "HOSTCHECK_TEST_SELECTION"
INTEGRATION = "tests/integration"
UNIT = "tests/unit"
GATE_MODULES = (
    "tests/unit/",
    "tests/integration/local/",
    "tests/integration/test_collection.py",
    "tests/integration/test_smoke.py",
)
# Covered by the gate alone: what only the unit tests, lint and docs read.
GATE_PATHS = (
    ".ansible-lint",
    ".gitignore",
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
    "docs/*",
    "benchmarks/*",
    "tests/unit/*",
    "tests/support/*",
    "tests/jobs/*",
    "tests/integration/local/*",
    "tests/sanity/*",
    "tests/costs.py",
    "tests/selection.py",
    "tests/full_pass.json",
    "plugins/doc_fragments/role_action.py",
    "inventory/hosts.yml",
    "inventory/group_vars/*",
    "monitoring/grafana/*",
    "monitoring/node-problem-detector/*",
    "hostcheck/compiled/*",
    "hostcheck/schema_build.py",
)
# What every integration module stands on: a change here selects them all.
EVERYTHING = (
    "Makefile",
    "pyproject.toml",
    "ansible.cfg",
    ".ci/*",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/paths.py",
    "tests/collection_link.py",
    "tests/integration/__init__.py",
    "tests/integration/conftest.py",
    "tests/integration/ansible.py",
    "tests/integration/callback_plugins/*",
    "tests/sandbox/__init__.py",
    "tests/sandbox/__main__.py",
    "tests/sandbox/budget.py",
    "tests/sandbox/fleet.py",
    "tests/sandbox/hostinit.py",
    "tests/sandbox/rootfs.py",
    "tests/sandbox/sources.py",
    "tests/sandbox/zipimport_cache.py",
    "inventory/sandbox_group_vars/*",
    "plugins/plugin_utils/__init__.py",
    "plugins/plugin_utils/role_action.py",
    "plugins/plugin_utils/platforms.py",
    "plugins/plugin_utils/numbers.py",
    "plugins/filter/numbers.py",
    "plugins/modules/host_read.py",
)


@dataclass
class Selection:
    base: str | None
    changed: list[str]
    everything: str | None = None  # why every module runs, when they all do
    modules: dict[str, list[str]] = field(default_factory=dict)  # module: the paths choosing it
    out_of_gate: frozenset[str] = frozenset()  # unit modules run only when chosen

    def runs(self, module: str) -> bool:
        if self.everything is not None or module in self.modules:
            return True
        return is_gate(module) and module not in self.out_of_gate

    def explain(self) -> str:
        base = self.base[:12] if self.base else "none"
        lines = [f"changed since the last full pass ({base}): {len(self.changed)} paths"]
        if self.everything:
            lines.append(f"selected: every test module, because {self.everything}")
            return "\n".join(lines)
        lines.append("selected: the gate (" + ", ".join(GATE_MODULES) + ")")
        if self.out_of_gate:
            lines.append(f"  less {len(self.out_of_gate)} unit modules, run when chosen")
        for module, paths in sorted(self.modules.items()):
            more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
            lines.append(f"  + {module}: {', '.join(paths[:3])}{more}")
        return "\n".join(lines)


def is_gate(module: str) -> bool:
    return any(module == gate or module.startswith(gate) for gate in GATE_MODULES if gate)


def declared_covers(path: Path) -> tuple[str, ...] | None:
    """A test module's COVERS, read from its source without importing it (None: none): a tuple
    of patterns, or built of tuples named in a `from tests... import NAME` of the module
    (`COVERS = (*JOB_RUN_COVERS, "tests/support/fake_libnvml.py")`)."""
    value = module_constant(path, "COVERS")
    return None if value is None else tuple(value)


def module_constant(path: Path, name: str) -> tuple | None:
    """The literal tuple a module assigns to name at its top level, names it imports from other
    tests modules resolved in their sources (None: no such assignment)."""
    source = path.read_text()
    if name not in source:
        return None  # most test modules: not parsed (every pytest worker imports this)
    body = ast.parse(source).body
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.")
        for alias in node.names
    }

    def value(node: ast.expr) -> tuple:
        if isinstance(node, ast.Name) and node.id in imported:
            module, original = imported[node.id]
            source = CHECKOUT.joinpath(*module.split(".")).with_suffix(".py")
            found = module_constant(source, original)
            if found is None:
                raise ValueError(f"{path}: {module} assigns no {original}")
            return found
        if isinstance(node, ast.Tuple):
            items: list = []
            for item in node.elts:
                items.extend(value(item.value) if isinstance(item, ast.Starred) else [value(item)])
            return tuple(items)
        return ast.literal_eval(node)

    for node in body:
        if isinstance(node, ast.Assign) and [
            getattr(target, "id", None) for target in node.targets
        ] == [name]:
            return value(node.value)
    return None


def selectable_modules(checkout: Path = CHECKOUT) -> dict[str, tuple[str, ...] | None]:
    """The modules a change selects, each with its COVERS: every integration module (None
    where it declares none), and the unit modules that declare COVERS."""
    found = {
        str(path.relative_to(checkout)): declared_covers(path)
        for path in sorted((checkout / INTEGRATION).glob("test_*.py"))
    }
    for path in sorted((checkout / UNIT).rglob("test_*.py")):
        covers = declared_covers(path)
        if covers is not None:
            found[str(path.relative_to(checkout))] = covers
    return found


def matches(path: str, patterns) -> bool:
    return any(fnmatchcase(path, pattern) for pattern in patterns)


def claimants(path: str, modules: dict[str, tuple[str, ...] | None]) -> list[str]:
    """The modules that claim a path (a module claims its own file)."""
    return [
        module
        for module, covers in modules.items()
        if module == path or (covers and matches(path, covers))
    ]


def reading_modules(checkout: Path = CHECKOUT) -> dict[str, tuple[str, ...]]:
    """The unit modules that declare READS, each with it."""
    found = {}
    for path in sorted((checkout / UNIT).rglob("test_*.py")):
        reads = module_constant(path, "READS")
        if reads is not None:
            found[str(path.relative_to(checkout))] = tuple(reads)
    return found


def select(changed: list[str], base: str | None, modules=None, readers=None) -> Selection:
    modules = selectable_modules() if modules is None else modules
    readers = reading_modules() if readers is None else readers
    measuring = {module for module in modules if module.startswith(UNIT + "/")}
    selection = Selection(base, sorted(changed), out_of_gate=frozenset(measuring | set(readers)))
    if base is None:
        selection.everything = "no full pass is recorded that this clone has (tests/full_pass.json)"
        return selection
    for path in selection.changed:
        if matches(path, EVERYTHING):
            selection.everything = f"{path} changed (every module stands on it)"
            return selection
        chosen = claimants(path, modules)
        if not chosen and not matches(path, GATE_PATHS):
            selection.everything = f"{path} changed and no test module claims it"
            return selection
        for module in chosen:
            selection.modules.setdefault(module, []).append(path)
        for module, reads in readers.items():
            if path == module or matches(path, reads):
                selection.modules.setdefault(module, []).append(path)
    return selection


def _git(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(CHECKOUT), *argv], capture_output=True, text=True, check=False
    )


def recorded_base() -> str | None:
    """The commit of the last full pass, when this clone has it."""
    try:
        commit = json.loads(RECORD.read_text())["commit"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    known = _git("cat-file", "-e", f"{commit}^{{commit}}")
    return commit if known.returncode == 0 else None


def recorded_module_walls() -> dict[str, int]:
    """Each module's wall time in seconds in the last full pass (none when not recorded)."""
    try:
        walls = json.loads(RECORD.read_text()).get("module_wall_s", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return walls if isinstance(walls, dict) else {}


def longest_first(modules: list[str], walls: dict[str, int], count: int) -> list[str]:
    """modules with the count longest of the last full pass first (longest first), the rest in
    their own order. Not all of them by length: modules that each keep a core busy cost more
    CPU side by side (a full run with every module longest first took 66.6 CPU-minutes and
    2,160 s, the same suite with two first 53.6 and 1,802 s, one day on one machine)."""
    known = sorted((m for m in modules if walls.get(m, 0) > 0), key=lambda m: -walls[m])
    first = known[:count]
    return first + [module for module in modules if module not in first]


def start_order(modules: list[str], walls: dict[str, int], workers: int, *, changed: bool):
    """The order modules start in: make test's selection (changed: a few modules beside the
    gate) longest first, all of them, so that the longest selected start at once; the full
    suite with one fewer than the workers longest first (longest_first)."""
    return longest_first(modules, walls, len(modules) if changed else max(1, workers - 1))


def changed_paths(base: str) -> list[str]:
    """Tracked paths that differ from the base (commits and the work tree), and untracked
    ones that git does not ignore."""
    differ = _git("diff", "--name-only", "--no-renames", base).stdout.splitlines()
    untracked = _git("ls-files", "--others", "--exclude-standard").stdout.splitlines()
    return sorted(set(differ) | set(untracked))


def current() -> Selection:
    base = recorded_base()
    return select(changed_paths(base) if base else [], base)


def tracked_paths() -> list[str]:
    return _git("ls-files").stdout.splitlines()


def head_state() -> dict:
    """The commit checked out and whether the work tree differs from it."""
    commit = _git("rev-parse", "HEAD").stdout.strip() or None
    dirty = bool(_git("status", "--porcelain").stdout.strip()) if commit else True
    return {"commit": commit, "dirty": dirty}


def record(ledger: Path | None = None) -> dict:
    """tests/full_pass.json from a ledger: a run of every module that passed, at a clean HEAD."""
    path = ledger or costs.newest()
    if path is None:
        raise SystemExit("tests.selection record: no ledger: run make test-all first")
    head, modules = costs.read(path)
    end = costs.run_end(path)
    problems = []
    if head.get("selection") != "all":
        problems.append("it did not run every module (make test-all does)")
    if end is None or end.get("exitstatus") != 0:
        problems.append("it did not finish with every test passed")
    if head.get("dirty") or head.get("commit") != head_state()["commit"]:
        problems.append(f"it ran at {head.get('commit')} with changes, or not at HEAD")
    if problems:
        raise SystemExit(f"tests.selection record: {path.name}: " + "; ".join(problems))
    entry = {
        "commit": head["commit"],
        "date": head["run"].removeprefix("run-"),
        "wall_s": round(end["end"] - end["start"]),
        "pace_s": head["pace_s"],
        "tests": sum(sum(module["outcomes"].values()) for module in modules),
        "modules": len(modules),
        # which modules the next runs start first (tests/conftest.py)
        "module_wall_s": {
            module["module"]: round(module["wall_s"])
            for module in sorted(modules, key=lambda module: -module["wall_s"])
        },
    }
    RECORD.write_text(json.dumps(entry, indent=2) + "\n")
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=["show", "record"], default="show")
    parser.add_argument("--ledger", type=Path, help="for record: a ledger (default: newest)")
    args = parser.parse_args(argv)
    if args.command == "record":
        entry = record(args.ledger)
        print(f"recorded the full pass at {entry['commit'][:12]} in {RECORD.name}: commit it")
        return 0
    print(current().explain())
    return 0


if __name__ == "__main__":
    sys.exit(main())
