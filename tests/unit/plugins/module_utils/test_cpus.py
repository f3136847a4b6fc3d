"""CPU lists and physical cores have one home (plugins/module_utils/cpus.py, the package's
hostcheck._shared.cpus): hostcheck's checks and the hostcheck role's probe count the same cores
on the same host, edge cases included."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import hostcheck_probe
from hostcheck._shared import cpus

from hostcheck.checks.loop import host_workers
from hostcheck.topology import read_topology
from tests.support.cpu_host import build_cpus


def counted(host) -> tuple[int | None, int, int]:
    """(the cpu check's physical cores, the loop check's cores, the probe's cores)."""
    system = host.system()
    return (
        read_topology(system).physical_cores,
        host_workers(system, {"ranks": 1})[0],
        hostcheck_probe.physical_cores(str(host.root)),
    )


def test_the_module_and_the_package_use_one_file():
    from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import cpus as shipped

    assert Path(shipped.__file__).resolve() == Path(cpus.__file__).resolve()
    assert hostcheck_probe.worker_cores is shipped.worker_cores


def test_cores_across_packages_and_dies(fake_host):
    build_cpus(fake_host, sockets=2, cores=2, threads=2, dies=2)  # core_id repeats per die
    assert counted(fake_host) == (8, 8, 8)


def test_a_cpu_without_topology_counts_the_online_cpus(fake_host):
    build_cpus(fake_host, sockets=1, cores=2, threads=2)
    (fake_host.root / "sys/devices/system/cpu/cpu3/topology/core_id").unlink()
    assert counted(fake_host) == (None, 4, 4)


def test_a_missing_die_id_is_die_0(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=1)
    for cpu in range(4):
        (fake_host.root / f"sys/devices/system/cpu/cpu{cpu}/topology/die_id").unlink()
    assert counted(fake_host) == (4, 4, 4)


@pytest.mark.parametrize("online", ["x\n", "0-3,,5\n", "3-1\n", ""])
def test_an_unreadable_online_file_falls_back_to_the_cpu_folders(fake_host, online):
    """The probe's own reader used to give no CPUs (so 1 core) where the cpu check listed the
    cpuN folders; both list the folders now."""
    build_cpus(fake_host, sockets=1, cores=3, threads=2)
    fake_host.file("/sys/devices/system/cpu/online", online)
    assert counted(fake_host) == (3, 3, 3)


def test_no_cpus_at_all_is_one_core(tmp_path):
    assert cpus.worker_cores({}) == 1
    assert cpus.physical_cores({}) is None
    assert hostcheck_probe.physical_cores(str(tmp_path)) == 1
