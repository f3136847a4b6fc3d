"""The checkout as the collection hostcheck.gpu_hosts for ansible-playbook, and the suite's
timeline: which module ran in which pytest worker, from when to when, so the critical path of
`make test` (modules side by side in JOBS workers) is visible at the end; the count of the
faults the fault tests injected and recovered from (each test's `fault` property); and each
module's wall and CPU time in the run's cost ledger (tests/costs.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

from tests import collection_link, costs, selection
from tests.paths import CHECKOUT

# The collection's plugins import their shared code as ansible_collections.hostcheck.gpu_hosts
# (a namespace package, as Ansible loads them); the link makes that name importable here too.
sys.path.insert(0, str(collection_link.ensure().parents[2]))

# pytest-xdist hands test modules to the workers in collection order (make test passes
# --no-loadscope-reorder; by default it would start the modules with the most tests first, and
# the OS matrix, few tests but the longest module, started two thirds into the run). The
# longest selected modules, by their wall time in the last full pass (tests/full_pass.json),
# start first: in the full suite one fewer than the workers, and the rest keep their order, so
# the last worker starts on light modules beside them; in make test's selection (a few modules
# beside the gate) all of them, longest first. A worker is given its next module only when one
# test of its current module is left (ModuleAtATime), so no module waits behind another's
# long last tests while a worker is free.

_START = time.time()
_LEDGER: list[costs.Ledger] = []  # this process's, when it runs tests of a recorded run
LEDGER_PATH = pytest.StashKey[Path]()
SELECTION = pytest.StashKey[selection.Selection]()


def pytest_configure(config) -> None:
    """The first pytest process of a run makes the ledger; its xdist workers (or itself, without
    workers) record into it; a pytest started by a test records nothing."""
    os.environ["HOSTCHECK_TEST_PAYLOAD_CACHE_ON"] = "1"  # tests/integration/ansible.py
    worker = getattr(config, "workerinput", None)
    if worker is None and os.environ.get(costs.LEDGER_ENVIRONMENT):
        return
    if worker is None:
        mode = _selection_mode(config)
        os.environ[selection.MODE_ENVIRONMENT] = mode
        path = costs.new_ledger(sys.argv, selection=mode, **selection.head_state())
        os.environ[costs.LEDGER_ENVIRONMENT] = str(path)
        config.stash[LEDGER_PATH] = path
        if getattr(config.option, "numprocesses", None):
            return
    _LEDGER.append(
        costs.Ledger(
            Path(os.environ[costs.LEDGER_ENVIRONMENT]),
            worker["workerid"] if worker else "main",
        )
    )


def pytest_sessionfinish(session, exitstatus) -> None:
    ledger = session.config.stash.get(LEDGER_PATH, None)
    if ledger is not None and ledger.exists():
        costs.end_ledger(ledger, int(exitstatus))


def pytest_unconfigure(config) -> None:
    while _LEDGER:
        _LEDGER.pop().close()
    if LEDGER_PATH in config.stash:  # the workers' cgroups (this process outlives them)
        costs.remove_empty_cgroups(costs.meter_name(config.stash[LEDGER_PATH], "*"))


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    ledger = _LEDGER[0] if _LEDGER else None
    module = _module_of(item.nodeid)
    if ledger is not None and (ledger.current is None or ledger.current.module != module):
        ledger.finish()
        ledger.start(module)
    yield
    if ledger is not None and (nextitem is None or _module_of(nextitem.nodeid) != module):
        ledger.finish()


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--changed-only",
        action="store_true",
        help="the gate and the integration modules that the change since the last full pass "
        "selects (tests/selection.py); make test",
    )


def _selection_mode(config) -> str:
    """'all' when every test of the suite runs, 'changed' for make test's selection, else
    'some' (a path, -k or -m)."""
    if config.getoption("changed_only"):
        return "changed"
    whole = [Path(arg).resolve() for arg in config.args] == [CHECKOUT / "tests"]
    narrowed = config.option.markexpr or config.option.keyword
    return "all" if whole and not narrowed else "some"


def _selection(config) -> selection.Selection:
    """make test's selection, worked out once per pytest process (it runs git)."""
    if SELECTION not in config.stash:
        config.stash[SELECTION] = selection.current()
    return config.stash[SELECTION]


def pytest_sessionstart(session) -> None:
    """make test says what it selected and why, before anything runs (-q hides the header)."""
    config = session.config
    if config.getoption("changed_only") and not hasattr(config, "workerinput"):
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.section("selection (tests/selection.py)")
            for line in _selection(config).explain().splitlines():
                reporter.write_line(line)


def _workers(config) -> int:
    """The run's pytest-xdist workers, the same in the controller and in each worker (whose
    collection order is the one xdist schedules by); 1 without xdist."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        return int(worker["workercount"])
    workers = getattr(config.option, "numprocesses", None)
    return workers if isinstance(workers, int) and workers > 0 else 1


class ModuleAtATime(LoadFileScheduling):
    """--dist loadfile, but a worker is given its next module only when one test of its current
    module is left (a worker must hold the test after the one it runs), not two: xdist's two
    queued a module behind tests that ran minutes longer while other workers were free."""

    def _reschedule(self, node) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) <= 1:
            self._assign_work_unit(node)


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return ModuleAtATime(config, log)
    return None


def pytest_collection_modifyitems(config, items) -> None:
    if config.getoption("changed_only"):
        chosen = _selection(config)
        runs = {item: chosen.runs(_module_of(item.nodeid)) for item in items}
        kept = [item for item in items if runs[item]]
        dropped = [item for item in items if not runs[item]]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    order = selection.start_order(
        list(dict.fromkeys(_module_of(item.nodeid) for item in items)),
        selection.recorded_module_walls(),
        _workers(config),
        changed=config.getoption("changed_only"),
    )
    rank = {module: place for place, module in enumerate(order)}
    items.sort(key=lambda item: rank[_module_of(item.nodeid)])


_SPANS: dict[tuple[str, str], list[float]] = {}
_FAULTS: dict[str, tuple[str, bool]] = {}  # test: (the fault, recovered)


def pytest_runtest_logreport(report) -> None:
    if _LEDGER and (report.when == "call" or report.outcome != "passed"):
        _LEDGER[0].outcome(_module_of(report.nodeid), report.outcome)
    worker = getattr(getattr(report, "node", None), "gateway", None)
    worker_id = worker.id if worker is not None else "main"
    module = _module_of(report.nodeid)
    for grouped in ("tests/unit/", "tests/integration/local/"):
        if module.startswith(grouped):
            module = f"{grouped}*"
    span = _SPANS.setdefault((worker_id, module), [report.start, report.stop])
    span[0] = min(span[0], report.start)
    span[1] = max(span[1], report.stop)
    fault = dict(report.user_properties).get("fault")
    if fault is not None:
        _, ok = _FAULTS.get(report.nodeid, (fault, True))
        _FAULTS[report.nodeid] = (fault, ok and report.passed)


def pytest_terminal_summary(terminalreporter, config) -> None:
    ledger = config.stash.get(LEDGER_PATH, None)
    if ledger is not None and ledger.exists() and costs.read(ledger)[1]:
        terminalreporter.section("cost per module, costliest first (python -m tests.costs)")
        terminalreporter.write_line(costs.table(ledger, top=15))
    if _FAULTS:
        recovered = sum(ok for _, ok in _FAULTS.values())
        terminalreporter.section(f"faults: {len(_FAULTS)} injected, {recovered} recovered")
        for fault, ok in _FAULTS.values():
            terminalreporter.write_line(f"{'recovered' if ok else 'NOT recovered':>13}  {fault}")
    if not _SPANS:
        return
    terminalreporter.section("timeline (minutes from the start: first test to last)")
    for (worker, module), (first, last) in sorted(_SPANS.items(), key=lambda item: item[1][0]):
        terminalreporter.write_line(
            f"{worker:>5} {(first - _START) / 60:5.1f} {(last - _START) / 60:5.1f} "
            f"{(last - first) / 60:5.1f}  {module}"
        )
