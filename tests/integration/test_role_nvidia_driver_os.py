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
from tests.integration.faults import (
    converges_then_changes_nothing,
    freeze_when_written,
    frozen,
    interrupted_run,
    power_cut,
)
from tests.integration.test_role_nvidia_driver import FAKE, PLAYBOOK
from tests.sandbox.fakegpu import GPU, push_repo
from tests.sandbox.lookalike_rocky import build_cuda_repo
from tests.sandbox.lookalike_ubuntu import DRIVER_VERSIONS
from tests.sandbox.oskinds import KINDS

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/nvidia_driver/*",
    "plugins/*/nvidia_driver*",
    "plugins/module_utils/pci.py",
    "tests/sandbox/fakegpu.py",
    "tests/integration/playbooks/fake_gpu.yml",
    "tests/integration/playbooks/nvidia_driver.yml",
    "plugins/modules/package_manager_ready.py",
    "plugins/modules/os_packages_missing.py",
    "plugins/module_utils/dpkg_status.py",
    "tests/sandbox/oskinds.py",
    "tests/sandbox/lookalike_*.py",
    "tests/integration/faults.py",
    "tests/integration/test_role_nvidia_driver.py",
)

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
        push_repo(fleet, host, repo)
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


def package_manager_tasks_run(run, host, tasks: tuple[str, ...]) -> list[str]:
    """Those of the role's tasks that ran the package manager in this run (not skipped)."""
    return [
        task
        for task in tasks
        if not run.task_results(f"nvidia_driver : {task}")[host.name].get("skipped")
    ]


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
    apt = ("Update the package lists", "Install the driver packages")
    assert package_manager_tasks_run(done, host, apt) == list(apt)
    assert package_manager_tasks_run(again, host, apt) == [], "the package database had them all"


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
    dnf = ("Install kernel-devel of the running kernel", "Install the versionlock plugin (dnf)")
    assert package_manager_tasks_run(done, host, dnf) == list(dnf)
    assert package_manager_tasks_run(again, host, dnf) == [], "the package database had them"


# ------------------------------------------------- the driver's install cut short by the power


def ubuntu_driver_state(fleet, host) -> dict:
    """What the driver's converge leaves on Ubuntu, read from dpkg and the host: every
    package's state and version, dpkg's audit, the driver packages' files against their
    md5sums, the holds, the module and persistenced."""
    driver = "dpkg-query -W -f='${Package}\\n' '*nvidia*' | sort"
    return {
        "packages": sh(
            fleet, host, "dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\\n' | sort"
        ),
        "dpkg audit": sh(fleet, host, "dpkg --audit || :"),
        "files unlike their md5sums": sh(fleet, host, f"{driver} | xargs dpkg --verify || :"),
        "holds": sh(fleet, host, "apt-mark showhold | sort"),
        "module": sh(fleet, host, f"modinfo -k {KERNEL} -F version nvidia"),
        "persistenced": persistenced(fleet, host),
    }


def rocky_driver_state(fleet, host) -> dict:
    """What the driver's converge leaves on Rocky, read from rpm, dnf and the host: every
    package (a transaction cut short can leave two versions of one), dnf's check of the
    database, the driver packages' files against the database, locks, stream, the module
    and persistenced."""
    checked = fleet.ssh(host, "dnf -q check")
    return {
        "packages": sh(
            fleet, host, "rpm -qa --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n' | sort"
        ),
        "dnf check": (checked.returncode, checked.stdout + checked.stderr),
        "files unlike the database": sh(
            fleet, host, "rpm -qa '*nvidia*' | sort | xargs rpm -V || :"
        ),
        "locks": sh(fleet, host, "dnf -q versionlock list | sort"),
        "stream": sh(fleet, host, "dnf -q module list --enabled nvidia-driver"),
        "module": sh(fleet, host, f"modinfo -k {KERNEL} -F version nvidia"),
        "persistenced": persistenced(fleet, host),
    }


def cut_short_and_recovered(
    fleet, host, remove: str, lock: str, left: str, gpu: tuple, extra_vars=None
):
    """Remove the driver the uninterrupted converge installed, converge again and cut the
    host's power the moment the driver's nvidia.ko is written, inside the package manager's
    transaction, and boot the host (its fake GPU, `gpu`: the loaded version and repository,
    made again: the boot loses it); the next converge must succeed and the one after it
    change nothing. Returns the process frozen in the transaction and what `left` (a command
    run after the boot, before the next converge) said of what the transaction left."""
    module = sh(fleet, host, f"modinfo -k {KERNEL} -n nvidia")
    sh(fleet, host, remove)
    assert fleet.ssh(host, f"test -e {module}").returncode != 0, f"{remove} left {module}"
    interrupted_run(
        fleet,
        host,
        power_cut(fleet, host),
        playbook=PLAYBOOK,
        extra_vars=extra_vars,
        limit=host.name,
        on_host=freeze_when_written(fleet, host, lock, module),
    )
    fleet.power_on(host)
    look_like_a_gpu_host(fleet, host, *gpu)
    holder = frozen(fleet, host)
    assert not holder.startswith("none"), f"nothing held {lock} when {module} was written: {holder}"
    found = sh(fleet, host, left)
    converges_then_changes_nothing(fleet, host, PLAYBOOK, extra_vars=extra_vars, limit=host.name)
    return holder, found


def converged(fleet, host, gpu: tuple, extra_vars=None) -> None:
    """The uninterrupted converge the fault is compared with: the test before's, or one now
    (make test-faults runs the fault tests alone)."""
    if fleet.ssh(host, f"modinfo -k {KERNEL} -F version nvidia").returncode == 0:
        return
    look_like_a_gpu_host(fleet, host, *gpu)
    done = run_playbook(fleet, PLAYBOOK, extra_vars=extra_vars, limit=host.name)
    assert done.returncode == 0, done.failure_text(host.name)


@pytest.mark.faults
def test_ubuntu_power_cut_inside_dpkg_installing_the_driver(fleet, record_property):
    host = fleet.hosts()[0]
    converged(fleet, host, (UBUNTU_DRIVER,))
    reference = ubuntu_driver_state(fleet, host)
    assert reference["module"] == UBUNTU_DRIVER
    remove = (
        "apt-mark unhold $(apt-mark showhold) >/dev/null; "
        "apt-get -y -q purge $(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n' '*nvidia*' "
        "| awk '/^ii/ {print $2}') >/dev/null"
    )
    record_property("fault", "host power cut while dpkg installs the driver (Ubuntu 24.04)")
    holder, audit = cut_short_and_recovered(
        fleet, host, remove, "/var/lib/dpkg/lock", "dpkg --audit || :", (UBUNTU_DRIVER,)
    )
    assert holder.endswith(" dpkg"), holder
    assert audit, "dpkg's database said nothing was left half way: the cut missed dpkg"
    assert ubuntu_driver_state(fleet, host) == reference


@pytest.mark.faults
def test_rocky_power_cut_inside_the_rpm_transaction_installing_the_driver(
    fleet, rocky_repo, record_property
):
    host = fleet.hosts()[1]
    converged(fleet, host, ("550.54.15", rocky_repo), ROCKY_REPO)
    reference = rocky_driver_state(fleet, host)
    assert reference["module"] == "550.54.15"
    remove = "dnf -q versionlock clear && dnf -y -q remove '*nvidia*' >/dev/null"
    record_property(
        "fault", "host power cut inside the rpm transaction installing the driver (Rocky 9)"
    )
    driver = "rpm -qa '*nvidia*' --qf '%{NAME}\\n' | sort"
    installed = sh(fleet, host, driver).split()
    holder, left = cut_short_and_recovered(
        fleet, host, remove, "/var/lib/rpm/.rpm.lock", driver, ("550.54.15", rocky_repo), ROCKY_REPO
    )
    assert holder.split()[0].isdigit(), holder
    assert set(left.split()) < set(installed), f"the cut left {left} of {installed}"
    assert rocky_driver_state(fleet, host) == reference
