"""The host's CPU topology as sysfs shows it: the online CPUs with their cores, and the CPUs of
each NUMA node. Read by the cpu and loop checks and by the loop's bandwidth measurement (the
CPUs local to a GPU); the parsing is hostcheck._shared.cpus's, shared with the roles."""

from __future__ import annotations

from dataclasses import dataclass

from hostcheck._shared.cpus import core_keys, online_cpus, parse_cpulist, physical_cores
from hostcheck.system import System

NODE_DIR = "/sys/devices/system/node"


@dataclass
class Topology:
    online: list[int]
    core_of: dict[int, tuple[int, int, int] | None]  # cpu -> (package, die, core)

    @property
    def physical_cores(self) -> int | None:
        return physical_cores(self.core_of)

    def cores_among(self, cpus: list[int]) -> int:
        return len({self.core_of[cpu] for cpu in cpus if self.core_of.get(cpu) is not None})


def read_topology(system: System) -> Topology:
    online = online_cpus(system.read, system.glob)
    return Topology(online, core_keys(system.read, online))


def read_numa(system: System) -> dict[int, list[int]]:
    nodes = {}
    for path in system.glob(f"{NODE_DIR}/node[0-9]*"):
        name = path.rsplit("/", 1)[-1]
        if not name[4:].isdigit():
            continue
        try:
            nodes[int(name[4:])] = parse_cpulist(system.read_value(f"{path}/cpulist") or "")
        except ValueError:
            nodes[int(name[4:])] = []
    return dict(sorted(nodes.items()))
