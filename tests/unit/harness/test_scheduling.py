"""How pytest-xdist's workers are given modules (ModuleAtATime in tests/conftest.py): the next
module only when one test of a worker's current module is left, so a module never queues behind
another's long last tests."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import ModuleAtATime


class Node:
    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indexes):
        self.sent += indexes

    def shutdown(self):
        self.shutting_down = True


def scheduler(collection: list[str], nodes: list[Node]) -> ModuleAtATime:
    settings = {"tx": [f"{len(nodes)}*popen"], "dist": "loadfile"}
    config = SimpleNamespace(getvalue=settings.get, option=SimpleNamespace(loadscopereorder=False))
    sched = ModuleAtATime(config)
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    return sched


def modules_sent(node: Node, collection: list[str]) -> list[str]:
    return list(dict.fromkeys(collection[i].split("::")[0] for i in node.sent))


def test_a_worker_gets_its_next_module_when_one_test_of_its_current_module_is_left():
    collection = [f"tests/long.py::t{i}" for i in range(4)] + [
        "tests/one.py::t0",
        "tests/two.py::t0",
        "tests/two.py::t1",
        "tests/three.py::t0",
        "tests/three.py::t1",
    ]
    first, second = Node("gw0"), Node("gw1")
    sched = scheduler(collection, [first, second])
    # a one-test module cannot start alone (a worker holds the test after the one it runs)
    assert modules_sent(first, collection) == ["tests/long.py"]
    assert modules_sent(second, collection) == ["tests/one.py", "tests/two.py"]
    sched.mark_test_complete(first, 0)
    sched.mark_test_complete(first, 1)  # two of long.py left: xdist's own would give one now
    assert modules_sent(first, collection) == ["tests/long.py"]
    sched.mark_test_complete(second, 4)
    sched.mark_test_complete(second, 5)  # one of two.py left
    assert modules_sent(second, collection) == ["tests/one.py", "tests/two.py", "tests/three.py"]
    sched.mark_test_complete(first, 2)
    sched.mark_test_complete(first, 3)
    assert first.shutting_down  # nothing left to give
    assert modules_sent(first, collection) == ["tests/long.py"]
