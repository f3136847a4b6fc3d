import os
import subprocess

import pytest

from hostcheck.checks import shm
from hostcheck.checks.base import CheckContext
from hostcheck.model import Status
from hostcheck.system import System

GiB = 2**30
MiB = 2**20
MEMINFO = "MemTotal:       32768000 kB\nMemFree:        1000 kB\n"  # 31.25 GiB
SHM_LINE = "40 24 0:45 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k\n"
ROOT_LINE = "22 1 253:1 / / rw,relatime - ext4 /dev/vda rw\n"


def config(min_size="50%", min_free="16MiB", **loader):
    shape = {"workers": None, "prefetch_factor": 2, "batch_bytes": None, "ranks": 1}
    shape.update(loader)
    return {"min_size": min_size, "min_free": min_free, "loader": shape}


@pytest.fixture
def docker_like(fake_host):
    """/dev/shm of 64 MiB, as Docker gives by default, 60 MiB of it free."""
    fake_host.file("/proc/self/mountinfo", ROOT_LINE + SHM_LINE)
    fake_host.file("/proc/meminfo", MEMINFO)
    fake_host.filesystem("/dev/shm", size=64 * MiB, free=60 * MiB)
    return fake_host


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def test_docker_default_fails_against_half_of_ram(docker_like):
    result = shm.run(docker_like.context(config("50%")))
    assert result.status == Status.FAIL
    size = finding(result, "size")
    assert size.status == Status.FAIL
    assert size.measured == 64 * MiB
    assert result.data["min_size_bytes"] == 32768000 * 1024 // 2 // 4096 * 4096
    assert "shm_size" in result.remedy


def test_small_threshold_passes_and_reports_values(docker_like):
    result = shm.run(docker_like.context(config("32MiB")))
    assert result.status == Status.PASS
    assert result.data["size_bytes"] == 64 * MiB
    assert result.data["free_bytes"] == 60 * MiB
    assert result.data["used_bytes"] == 4 * MiB
    assert result.data["options"][:3] == ["rw", "nosuid", "nodev"]


def test_low_free_space_warns(docker_like):
    result = shm.run(docker_like.context(config("32MiB", min_free="100MiB")))
    assert result.status == Status.WARN
    assert finding(result, "free").status == Status.WARN


def test_loader_need_larger_than_size_fails(docker_like):
    cfg = config("32MiB", workers=8, prefetch_factor=2, batch_bytes="16MiB", ranks=1)
    result = shm.run(docker_like.context(cfg))
    need = finding(result, "loader need")
    assert need.measured == 8 * 2 * 16 * MiB
    assert need.status == Status.FAIL
    assert result.status == Status.FAIL


def test_loader_need_that_fits_size_but_not_free_space_warns(docker_like):
    cfg = config("32MiB", workers=2, prefetch_factor=2, batch_bytes="15MiB", ranks=1)
    docker_like.filesystem("/dev/shm", size=64 * MiB, free=40 * MiB)
    result = shm.run(docker_like.context(cfg))
    assert finding(result, "loader need").measured == 60 * MiB
    assert finding(result, "loader need").status == Status.WARN


def test_loader_need_multiplies_ranks():
    shape = {"workers": 4, "prefetch_factor": 3, "batch_bytes": "10MiB", "ranks": 8}
    assert shm.loader_need(shape) == 4 * 3 * 10 * MiB * 8
    assert shm.loader_need({**shape, "workers": 0}) is None
    assert shm.loader_need({**shape, "batch_bytes": None}) is None


def test_not_a_mount_point_fails(fake_host):
    fake_host.file("/proc/self/mountinfo", ROOT_LINE)
    fake_host.file("/proc/meminfo", MEMINFO)
    result = shm.run(fake_host.context(config()))
    assert result.status == Status.FAIL
    assert "not a mount point" in result.summary


def test_not_tmpfs_fails(fake_host):
    fake_host.file(
        "/proc/self/mountinfo", ROOT_LINE + "40 22 8:1 / /dev/shm rw - ext4 /dev/sda1 rw\n"
    )
    fake_host.file("/proc/meminfo", MEMINFO)
    fake_host.filesystem("/dev/shm", size=64 * GiB, free=64 * GiB)
    result = shm.run(fake_host.context(config("1GiB")))
    assert finding(result, "type").status == Status.FAIL
    assert finding(result, "type").measured == "ext4"


@pytest.mark.real
def test_real_machine_agrees_with_df_and_findmnt():
    result = shm.run(CheckContext(system=System(), config=config("1MiB", min_free="0")))
    df = (
        subprocess.run(
            ["df", "-B1", "--output=size,avail", "/dev/shm"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.split("\n")[1]
        .split()
    )
    fstype = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "/dev/shm"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    assert result.data["size_bytes"] == int(df[0])
    assert abs(result.data["free_bytes"] - int(df[1])) <= 16 * MiB  # others may write meanwhile
    assert result.data["fs_type"] == fstype
    with open("/proc/meminfo") as handle:
        total_kb = int(handle.readline().split()[1])
    assert result.data["ram_bytes"] == total_kb * 1024
    assert os.path.ismount("/dev/shm")
