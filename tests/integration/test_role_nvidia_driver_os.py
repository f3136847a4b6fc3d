"""The nvidia_driver role's Ubuntu and RHEL-family paths on fake-GPU look-alike hosts that boot
systemd (tests/sandbox/lookalike_ubuntu.py, lookalike_rocky.py): on Ubuntu 24.04 the default
source, Ubuntu's own -server driver packages, installed and held with dpkg; on Rocky 9 NVIDIA's
CUDA repository as a yum repository with its key, the branch's dnf module stream, versionlock;
on both nvidia-persistenced enabled and running under systemd, and a second run changes
nothing. Debian's path is in test_role_nvidia_driver.py."""

from __future__ import annotations

import platform

import pytest

from tests.integration.ansible import run_playbook
from tests.integration.test_role_nvidia_driver import FAKE, PLAYBOOK
from tests.sandbox.fakegpu import GPU
from tests.sandbox.lookalike_rocky import build_cuda_repo
from tests.sandbox.lookalike_ubuntu import DRIVER_VERSIONS
from tests.sandbox.oskinds import KINDS

pytestmark = pytest.mark.integration
KERNEL = platform.release()
UBUNTU_DRIVER = DRIVER_VERSIONS["570"]  # the stand-in archive's version of the default branch
ROCKY_REPO = {
    "nvidia_driver_branch": "550",
    "nvidia_driver_cuda_repo_url": "file:///srv/fake-cuda",
    "nvidia_driver_cuda_repo_key_url": "file:///srv/fake-cuda/key.asc",
}


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("nvidia_driver-os", hosts=2, os_kinds=[KINDS["ubuntu2404"], KINDS["rocky9"]])


@pytest.fixture(scope="module")
def rocky_repo(tmp_path_factory):
    return build_cuda_repo(tmp_path_factory.mktemp("fake-cuda-rpm") / "repo", KERNEL)


def look_like_a_gpu_host(fleet, host, loaded: str, repo=None):
    """A GPU on the PCI bus and the driver version already loaded (this machine's kernel has no
    modules: the role's modprobe of a driver not yet loaded cannot run here)."""
    extra = {"fake_pci": [GPU], "fake_loaded_version": loaded, "fake_secure_boot": "disabled"}
    if repo is not None:
        extra["fake_repo"] = str(repo)
    done = run_playbook(fleet, FAKE, extra_vars=extra, limit=host.name)
    assert done.returncode == 0, done.stderr or done.output


def sh(fleet, host, command: str) -> str:
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stderr}"
    return done.stdout.strip()


def persistenced(fleet, host) -> list[str]:
    return sh(
        fleet,
        host,
        "systemctl is-enabled nvidia-persistenced; systemctl is-active nvidia-persistenced",
    ).split()


def test_ubuntu_installs_and_holds_its_own_server_driver_packages(fleet):
    host = fleet.hosts()[0]
    assert host.os == "ubuntu2404"
    look_like_a_gpu_host(fleet, host, UBUNTU_DRIVER)
    done = run_playbook(fleet, PLAYBOOK, limit=host.name)  # the defaults: branch 570, open, DKMS
    assert done.returncode == 0, done.failure_text(host.name)
    wanted = ["nvidia-headless-570-server-open", "nvidia-utils-570-server"]
    held = sh(fleet, host, "apt-mark showhold").split()
    assert set(wanted) <= set(held), held
    status = sh(fleet, host, f"dpkg-query -W -f='${{Status}}\\n' {' '.join(wanted)}").splitlines()
    assert status == ["hold ok installed"] * 2
    assert sh(fleet, host, f"modinfo -k {KERNEL} -F version nvidia") == UBUNTU_DRIVER
    assert "nouveau" in sh(fleet, host, "cat /etc/modprobe.d/hostcheck-blacklist-nouveau.conf")
    assert persistenced(fleet, host) == ["enabled", "active"]
    again = run_playbook(fleet, PLAYBOOK, limit=host.name)
    assert again.returncode == 0 and again.changed(host.name) == 0


def test_rocky_enables_the_branch_stream_locks_it_and_runs_persistenced(fleet, rocky_repo):
    host = fleet.hosts()[1]
    assert host.os == "rocky9"
    look_like_a_gpu_host(fleet, host, "550.54.15", rocky_repo)
    done = run_playbook(fleet, PLAYBOOK, extra_vars=ROCKY_REPO, limit=host.name)
    assert done.returncode == 0, done.failure_text(host.name)
    repo = sh(fleet, host, "cat /etc/yum.repos.d/*cuda*.repo")
    assert "baseurl = file:///srv/fake-cuda" in repo and "gpgcheck = 1" in repo
    streams = sh(fleet, host, "dnf -q module list --enabled nvidia-driver")
    assert "550-open [e]" in streams, streams
    assert sh(fleet, host, "rpm -q --qf '%{VERSION}\\n' nvidia-driver") == "550.54.15"
    assert sh(fleet, host, f"modinfo -k {KERNEL} -F version nvidia") == "550.54.15"
    locks = sh(fleet, host, "dnf -q versionlock list")
    assert "nvidia-driver-3:550.54.15" in locks and "nvidia-persistenced-3:550.54.15" in locks
    assert persistenced(fleet, host) == ["enabled", "active"]
    again = run_playbook(fleet, PLAYBOOK, extra_vars=ROCKY_REPO, limit=host.name)
    assert again.returncode == 0 and again.changed(host.name) == 0
