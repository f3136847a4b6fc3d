"""The checkout as the collection hostcheck.gpu_hosts for ansible-playbook, and the suite's
timeline: which module ran in which pytest worker, from when to when, so the critical path of
`make test` (modules side by side in JOBS workers) is visible at the end; and the count of the
faults the fault tests injected and recovered from (each test's `fault` property)."""

from __future__ import annotations

import sys
import time

from tests import collection_link

# The collection's plugins import their shared code as ansible_collections.hostcheck.gpu_hosts
# (a namespace package, as Ansible loads them); the link makes that name importable here too.
sys.path.insert(0, str(collection_link.ensure().parents[2]))

# pytest-xdist hands test modules to the workers in collection order (make test passes
# --no-loadscope-reorder; by default it would start the modules with the most tests first, and
# the OS matrix, few tests but the longest module, started two thirds into the run). The
# longest modules start first, the rest keep their order.
LONGEST_FIRST = ("tests/integration/test_os_matrix.py", "tests/integration/test_faults.py")

_START = time.time()


def pytest_collection_modifyitems(items) -> None:
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in LONGEST_FIRST)


_SPANS: dict[tuple[str, str], list[float]] = {}
_FAULTS: dict[str, tuple[str, bool]] = {}  # test: (the fault, recovered)


def pytest_runtest_logreport(report) -> None:
    worker = getattr(getattr(report, "node", None), "gateway", None)
    worker_id = worker.id if worker is not None else "main"
    module = report.nodeid.split("::", 1)[0]
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


def pytest_terminal_summary(terminalreporter) -> None:
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
