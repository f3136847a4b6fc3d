"""The sandbox fleet for integration tests: three real SSH hosts, brought up once per run."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.sandbox.fleet import Fleet


def sandbox_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the sandbox fleet needs root (namespaces, mounts, loop devices)"
    for tool in ("mmdebstrap", "systemd-nspawn", "unshare", "losetup", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs the sandbox tools as root)"
    if not os.path.exists("/dev/loop-control"):
        return "this machine has no loop devices (/dev/loop-control is missing)"
    return None


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    reason = sandbox_unavailable()
    if reason:
        pytest.skip(reason)
    # one fleet per pytest-xdist worker: instance names keep their hosts and folders apart
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    sandbox = Fleet(instance=f"pytest{worker}", log=lambda message: None)
    try:
        sandbox.up(3)
        yield sandbox
    finally:
        sandbox.down(quiet=True)


@pytest.fixture(scope="session")
def hosts(fleet: Fleet):
    return fleet.hosts()


@pytest.fixture(scope="module")
def make_fleet():
    """Fresh fleets of their own (instance names keep them apart), removed after the module."""
    reason = sandbox_unavailable()
    if reason:
        pytest.skip(reason)
    made: list[Fleet] = []

    def make(instance: str, hosts: int = 1, **options) -> Fleet:
        sandbox = Fleet(instance=instance, log=lambda message: None, **options)
        made.append(sandbox)
        sandbox.up(hosts)
        return sandbox

    try:
        yield make
    finally:
        for sandbox in made:
            sandbox.down(quiet=True)
