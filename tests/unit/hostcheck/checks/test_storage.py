from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck import config as c
from hostcheck.checks import storage
from hostcheck.checks.base import CheckContext, RunOptions
from hostcheck.checks.storage import blockdev, readspeed
from hostcheck.model import Status
from hostcheck.system import System

GiB = 2**30
MiB = 2**20
NVME_PCI = "/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme"
SATA = "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0"
ROOT_LINE = "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"

CONFIG = {
    "dataset_path": None,
    "required_mount_options": ["noatime"],
    "allow_rotational": False,
    "allow_network": False,
    "min_free": None,
    "read_test": {
        "enabled": True,
        "max_files": 16,
        "max_bytes": "64MiB",
        "block_size": "1MiB",
        "max_seconds": 20,
        "scan_limit": 1000,
        "min_bytes_per_second": None,
    },
}


def config(read=None, **top):
    cfg = copy.deepcopy(CONFIG)
    cfg.update(top)
    cfg["read_test"].update(read or {})
    return cfg


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def names(result, name):
    return [f.name for f in result.findings if f.name == name]


# ---------------------------------------------------------------- fake sysfs


def _link(host, link: str, target: str) -> None:
    """A relative symlink, as sysfs has, so it resolves inside the fixture root."""
    link_real = host.root / link.lstrip("/")
    target_real = host.root / target.lstrip("/")
    link_real.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target_real, link_real.parent), link_real)


def _register(host, directory: str, name: str, devnum: str) -> None:
    host.file(f"{directory}/dev", devnum + "\n")
    _link(host, f"/sys/dev/block/{devnum}", directory)
    _link(host, f"/sys/class/block/{name}", directory)


def disk(
    host, parent: str, name: str, devnum: str, rotational=0, sectors=0, model=None, transport=None
) -> str:
    directory = f"{parent}/block/{name}"
    _register(host, directory, name, devnum)
    _link(host, f"/sys/block/{name}", directory)
    host.file(f"{directory}/queue/rotational", f"{rotational}\n")
    host.file(f"{directory}/size", f"{sectors}\n")
    host.file(f"{directory}/uevent", f"MAJOR={devnum.split(':')[0]}\nDEVNAME={name}\n")
    if model is not None:
        host.file(f"{directory}/device/model", model + "      \n")
    if transport is not None:
        host.file(f"{directory}/device/transport", transport + "\n")
    return directory


def partition(host, disk_dir: str, name: str, devnum: str, number: int) -> str:
    directory = f"{disk_dir}/{name}"
    _register(host, directory, name, devnum)
    host.file(f"{directory}/partition", f"{number}\n")
    host.file(f"{directory}/size", "1000\n")
    return directory


def virtual(host, name: str, devnum: str, slaves: list[str], **files: str) -> str:
    directory = f"/sys/devices/virtual/block/{name}"
    _register(host, directory, name, devnum)
    _link(host, f"/sys/block/{name}", directory)
    (host.root / directory.lstrip("/") / "slaves").mkdir(parents=True, exist_ok=True)
    for slave in slaves:
        _link(host, f"{directory}/slaves/{os.path.basename(slave)}", slave)
    for path, text in files.items():
        host.file(f"{directory}/{path.replace('__', '/')}", text + "\n")
    return directory


def mountinfo(host, *lines: str) -> None:
    host.file("/proc/self/mountinfo", ROOT_LINE + "".join(lines))


def mount_line(point, devnum, fs_type, source, options="rw,noatime", mount_id=40):
    return f"{mount_id} 22 {devnum} / {point} {options} shared:1 - {fs_type} {source} rw\n"


def dataset(host, point="/data", sizes=(1 * MiB, 300_000, 4096)) -> int:
    for number, size in enumerate(sizes):
        path = host.root / point.lstrip("/") / f"shard-{number:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    return sum(sizes)


def run(host, cfg=None, path="/data"):
    return storage.run(host.context(cfg or config(), RunOptions(dataset_path=path)))


@pytest.fixture
def nvme_partition(fake_host):
    """/data is ext4 on nvme0n1p2, a partition of a Samsung NVMe disk."""
    root = disk(
        fake_host,
        f"{NVME_PCI}/nvme0",
        "nvme0n1",
        "259:0",
        0,
        3907029168,
        "Samsung SSD 990 PRO 2TB",
        "pcie",
    )
    partition(fake_host, root, "nvme0n1p1", "259:1", 1)
    partition(fake_host, root, "nvme0n1p2", "259:2", 2)
    mountinfo(fake_host, mount_line("/data", "259:2", "ext4", "/dev/nvme0n1p2"))
    fake_host.total = dataset(fake_host)
    return fake_host


# ---------------------------------------------------------------- fixture tests


def test_partition_resolves_to_its_disk(nvme_partition):
    result = run(nvme_partition)
    assert result.status == Status.PASS, result.summary
    disks = result.data["block"]["disks"]
    assert [d["name"] for d in disks] == ["nvme0n1"]
    assert disks[0]["nvme"] is True
    assert disks[0]["rotational"] is False
    assert disks[0]["model"] == "Samsung SSD 990 PRO 2TB"
    assert disks[0]["size_bytes"] == 3907029168 * 512
    assert disks[0]["transport"] == "pcie"
    stack = result.data["block"]["stack"]
    assert (stack["name"], stack["type"], stack["detail"]) == ("nvme0n1p2", "partition", "2")
    assert [c["name"] for c in stack["children"]] == ["nvme0n1"]
    assert result.data["mount_point"] == "/data"
    assert result.data["fs_type"] == "ext4"
    assert result.data["atime"] == "noatime"
    assert finding(result, "backing").display.startswith("nvme0n1p2(2) <- nvme0n1; disks nvme0n1")
    assert finding(result, "rotational").measured == []


def test_dm_over_two_nvme_disks(fake_host):
    one = disk(fake_host, f"{NVME_PCI}/nvme0", "nvme0n1", "259:0", 0, 2000)
    two = disk(fake_host, f"{NVME_PCI}/nvme1", "nvme1n1", "259:1", 0, 2000)
    virtual(
        fake_host, "dm-0", "253:0", [one, two], dm__name="vg0-data", dm__uuid="LVM-abcdefgh12345678"
    )
    mountinfo(fake_host, mount_line("/data", "253:0", "xfs", "/dev/mapper/vg0-data"))
    dataset(fake_host)
    result = run(fake_host)
    assert result.status == Status.PASS, result.summary
    block = result.data["block"]
    assert block["device"] == "dm-0"
    assert [d["name"] for d in block["disks"]] == ["nvme0n1", "nvme1n1"]
    assert all(d["nvme"] and d["rotational"] is False for d in block["disks"])
    assert (block["stack"]["type"], block["stack"]["detail"]) == ("lvm", "vg0-data")
    assert block["problems"] == []


def test_md_raid_over_partitions_of_two_spinning_disks(fake_host):
    sda = disk(fake_host, f"{SATA}/0:0:0:0", "sda", "8:0", 1, 1000, "ST4000NM0035-1V4")
    sdb = disk(fake_host, f"{SATA}/0:0:1:0", "sdb", "8:16", 1, 1000, "ST4000NM0035-1V4")
    sda1 = partition(fake_host, sda, "sda1", "8:1", 1)
    sdb1 = partition(fake_host, sdb, "sdb1", "8:17", 1)
    virtual(fake_host, "md0", "9:0", [sda1, sdb1], md__level="raid1")
    mountinfo(fake_host, mount_line("/data", "9:0", "ext4", "/dev/md0"))
    dataset(fake_host)

    strict = run(fake_host)
    assert strict.status == Status.FAIL
    rot = finding(strict, "rotational")
    assert rot.status == Status.FAIL
    assert rot.measured == ["sda", "sdb"]
    block = strict.data["block"]
    assert [(d["name"], d["kind"], d["rotational"], d["nvme"]) for d in block["disks"]] == [
        ("sda", "scsi", True, False),
        ("sdb", "scsi", True, False),
    ]
    assert block["disks"][0]["model"] == "ST4000NM0035-1V4"
    assert (block["stack"]["type"], block["stack"]["detail"]) == ("md", "raid1")
    assert [c["name"] for c in block["stack"]["children"]] == ["sda1", "sdb1"]
    assert finding(strict, "backing").display.startswith("md0(raid1) <- [sda1(1) <- sda,")
    assert "dataset_staging_devices" in strict.remedy
    assert "ansible-playbook site.yml --tags dataset_staging" in strict.remedy

    allowed = run(fake_host, config(allow_rotational=True))
    assert finding(allowed, "rotational").status == Status.PASS
    assert allowed.status == Status.PASS


def test_lvm_on_md_on_partitions_resolves_recursively(fake_host):
    a = disk(fake_host, f"{NVME_PCI}/nvme0", "nvme0n1", "259:0", 0, 10)
    b = disk(fake_host, f"{NVME_PCI}/nvme1", "nvme1n1", "259:3", 0, 10)
    a1 = partition(fake_host, a, "nvme0n1p1", "259:1", 1)
    b1 = partition(fake_host, b, "nvme1n1p1", "259:4", 1)
    md = virtual(fake_host, "md127", "9:127", [a1, b1], md__level="raid0")
    virtual(fake_host, "dm-3", "253:3", [md], dm__name="data-crypt", dm__uuid="CRYPT-LUKS2-x")
    mountinfo(fake_host, mount_line("/data", "253:3", "ext4", "/dev/mapper/data-crypt"))
    dataset(fake_host)
    result = run(fake_host)
    assert [d["name"] for d in result.data["block"]["disks"]] == ["nvme0n1", "nvme1n1"]
    assert result.data["block"]["stack"]["type"] == "crypt"
    assert finding(result, "backing").display.startswith(
        "dm-3(data-crypt) <- md127(raid0) <- [nvme0n1p1(1) <- nvme0n1, nvme1n1p1(1) <- nvme1n1]"
    )


def test_nfs_mount_is_network(fake_host):
    mountinfo(
        fake_host, mount_line("/data", "0:52", "nfs4", "filer:/export/imagenet", "rw,relatime")
    )
    dataset(fake_host)
    strict = run(fake_host, config(read={"enabled": False}))
    assert strict.data["storage_kind"] == "network"
    assert strict.data["block"] is None
    backing = finding(strict, "backing")
    assert backing.status == Status.FAIL
    assert backing.display == "network file system nfs4 from filer:/export/imagenet"
    assert names(strict, "rotational") == []
    assert strict.status == Status.FAIL

    allowed = run(fake_host, config(allow_network=True, read={"enabled": False}))
    assert finding(allowed, "backing").status == Status.PASS
    assert allowed.status == Status.WARN  # relatime is still a warning
    assert finding(allowed, "mount options").status == Status.WARN


def test_tmpfs_mount_is_memory(fake_host):
    mountinfo(fake_host, mount_line("/data", "0:27", "tmpfs", "tmpfs", "rw,noatime"))
    dataset(fake_host)
    result = run(fake_host)
    assert result.data["storage_kind"] == "memory"
    assert finding(result, "backing").measured == "memory"
    assert finding(result, "backing").status == Status.PASS
    assert result.data["read"]["cache_bypassed"] is False
    assert "RAM" in result.data["read"]["no_bypass_reason"]
    assert result.status == Status.PASS


def test_overlay_is_reported_as_such(fake_host):
    fake_host.file("/proc/self/mountinfo", "30 1 0:44 / / rw,noatime - overlay overlay rw\n")
    dataset(fake_host)
    result = run(fake_host, config(read={"enabled": False}))
    assert result.data["storage_kind"] == "overlay"
    assert result.data["mount_point"] == "/"
    assert finding(result, "backing").status == Status.PASS


def test_btrfs_anonymous_device_is_resolved_through_its_source(fake_host):
    root = disk(fake_host, f"{NVME_PCI}/nvme0", "nvme0n1", "259:0", 0, 10)
    partition(fake_host, root, "nvme0n1p2", "259:2", 2)
    mountinfo(fake_host, mount_line("/data", "0:33", "btrfs", "/dev/nvme0n1p2"))
    dataset(fake_host)
    result = run(fake_host)
    assert result.data["storage_kind"] == "block"
    assert [d["name"] for d in result.data["block"]["disks"]] == ["nvme0n1"]


def test_mapper_symlink_source_is_followed(fake_host):
    one = disk(fake_host, f"{NVME_PCI}/nvme0", "nvme0n1", "259:0", 0, 10)
    virtual(fake_host, "dm-1", "253:1", [one], dm__name="vg-x", dm__uuid="LVM-x")
    _link(fake_host, "/dev/mapper/vg-x", "/dev/dm-1")
    (fake_host.root / "dev/dm-1").touch()
    mountinfo(fake_host, mount_line("/data", "0:40", "btrfs", "/dev/mapper/vg-x"))
    dataset(fake_host)
    result = run(fake_host, config(read={"enabled": False}))
    assert result.data["block"]["device"] == "dm-1"
    assert [d["name"] for d in result.data["block"]["disks"]] == ["nvme0n1"]


def test_nvme_over_tcp_counts_as_network(fake_host):
    disk(
        fake_host,
        "/sys/devices/virtual/nvme-fabrics/ctl/nvme3",
        "nvme3n1",
        "259:9",
        0,
        10,
        "Linux",
        "tcp",
    )
    mountinfo(fake_host, mount_line("/data", "259:9", "xfs", "/dev/nvme3n1"))
    dataset(fake_host)
    result = run(fake_host, config(read={"enabled": False}))
    backing = finding(result, "backing")
    assert backing.status == Status.FAIL
    assert backing.measured == "network block device"
    assert result.data["block"]["disks"][0]["remote"] is True
    ok = run(fake_host, config(allow_network=True, read={"enabled": False}))
    assert finding(ok, "backing").status == Status.PASS


def test_loop_device_reports_backing_file(fake_host):
    loop = disk(fake_host, "/sys/devices/virtual", "loop3", "7:3", 1, 2048)
    fake_host.file(f"{loop}/loop/backing_file", "/var/lib/sandbox/nvme.img\n")
    mountinfo(fake_host, mount_line("/data", "7:3", "ext4", "/dev/loop3"))
    dataset(fake_host)
    result = run(fake_host, config(allow_rotational=True, read={"enabled": False}))
    (only,) = result.data["block"]["disks"]
    assert (only["kind"], only["backing_file"], only["size_bytes"]) == (
        "loop",
        "/var/lib/sandbox/nvme.img",
        2048 * 512,
    )
    assert result.status == Status.PASS


def test_device_missing_from_sysfs_warns(fake_host):
    mountinfo(fake_host, mount_line("/data", "259:7", "ext4", "/dev/nvme9n1"))
    dataset(fake_host)
    result = run(fake_host, config(read={"enabled": False}))
    backing = finding(result, "backing")
    assert backing.status == Status.WARN
    assert backing.measured == "unresolved"
    assert "/sys/dev/block/259:7 not found" in backing.display
    assert result.status == Status.WARN


def test_slave_cycle_stops_with_a_problem(fake_host):
    a = "/sys/devices/virtual/block/dm-0"
    b = "/sys/devices/virtual/block/dm-1"
    virtual(fake_host, "dm-0", "253:0", [b], dm__name="a")
    virtual(fake_host, "dm-1", "253:1", [a], dm__name="b")
    res = blockdev.resolve_devnum(fake_host.system(), 253, 0)
    assert any("deeper than" in p for p in res.problems)
    assert res.disks == []


def test_atime_modes(nvme_partition):
    for options, atime, status in (
        ("rw,noatime", "noatime", Status.PASS),
        ("rw,relatime", "relatime", Status.WARN),
        ("rw", "strictatime", Status.WARN),
    ):
        mountinfo(nvme_partition, mount_line("/data", "259:2", "ext4", "/dev/nvme0n1p2", options))
        result = run(nvme_partition, config(read={"enabled": False}))
        opts = finding(result, "mount options")
        assert (opts.status, result.data["atime"]) == (status, atime)
        assert opts.measured == options.split(",")
        if status == Status.WARN:
            assert opts.display == f"{atime}, missing noatime"
            assert "dataset_staging_mount_options" in result.remedy
            assert "ansible-playbook site.yml --tags dataset_staging" in result.remedy
    relaxed = run(nvme_partition, config(required_mount_options=[], read={"enabled": False}))
    assert finding(relaxed, "mount options").status == Status.PASS


def test_free_space_against_minimum(nvme_partition):
    nvme_partition.filesystem("/data", size=100 * GiB, free=5 * GiB)
    low = run(nvme_partition, config(min_free="10GiB", read={"enabled": False}))
    free = finding(low, "free")
    assert (free.status, free.measured) == (Status.WARN, 5 * GiB)
    assert low.data["size_bytes"] == 100 * GiB
    assert low.status == Status.WARN
    enough = run(nvme_partition, config(min_free="4GiB", read={"enabled": False}))
    assert finding(enough, "free").status == Status.PASS
    none = run(nvme_partition, config(read={"enabled": False}))
    assert finding(none, "free").expected == "no threshold"


def test_read_throughput_reads_the_files(nvme_partition):
    result = run(nvme_partition)
    read = result.data["read"]
    assert read["bytes"] == nvme_partition.total
    assert read["files"] == 3
    assert read["sampled_files"] == 3
    assert read["scan_complete"] is True
    assert read["direct_bytes"] + read["buffered_bytes"] == nvme_partition.total
    through = finding(result, "read throughput")
    assert through.status == Status.PASS
    assert through.measured == read["bytes_per_s"] > 0
    assert through.expected == "no threshold"


def test_read_throughput_below_minimum_fails(nvme_partition):
    result = run(nvme_partition, config(read={"min_bytes_per_second": "1000TB"}))
    through = finding(result, "read throughput")
    assert through.status == Status.FAIL
    assert through.expected == ">= 1000000000 MB/s"
    assert result.status == Status.FAIL
    assert "dataset_staging_devices" in result.remedy


def test_read_limits_files_and_bytes(nvme_partition):
    dataset(nvme_partition, sizes=[64 * 1024] * 40)
    result = run(nvme_partition, config(read={"max_files": 5, "max_bytes": "1MiB"}))
    read = result.data["read"]
    assert read["sampled_files"] == 5
    assert read["files"] <= 5
    assert read["scanned_files"] == 40
    capped = run(nvme_partition, config(read={"max_files": 40, "max_bytes": "200KiB"}))
    assert capped.data["read"]["stopped_by"] == "max_bytes"
    # files are read in whole blocks, so the cap is passed by less than one file here
    assert 200 * 1024 <= capped.data["read"]["bytes"] < 200 * 1024 + MiB


def test_empty_dataset_skips_the_read(nvme_partition):
    (nvme_partition.root / "empty").mkdir()
    mountinfo(nvme_partition, mount_line("/empty", "259:2", "ext4", "/dev/nvme0n1p2"))
    result = run(nvme_partition, path="/empty")
    through = finding(result, "read throughput")
    assert through.status == Status.SKIP
    assert result.status == Status.PASS


def test_unlistable_dataset_is_an_error(nvme_partition, monkeypatch):
    def refusing(path):
        raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    monkeypatch.setattr(readspeed.os, "scandir", refusing)
    result = run(nvme_partition)
    through = finding(result, "read throughput")
    assert through.status == Status.ERROR
    assert through.display.endswith("/data: Permission denied")
    assert result.status == Status.ERROR


def test_read_disabled_has_no_read_finding(nvme_partition):
    result = run(nvme_partition, config(read={"enabled": False}))
    assert names(result, "read throughput") == []
    assert "read" not in result.data


def test_no_path_skips(nvme_partition):
    result = storage.run(nvme_partition.context(config()))
    assert result.status == Status.SKIP
    assert "--dataset-path" in result.summary


def test_profile_path_used_and_option_wins(nvme_partition):
    from_profile = storage.run(nvme_partition.context(config(dataset_path="/data")))
    assert from_profile.data["resolved_path"] == "/data"
    (nvme_partition.root / "other").mkdir()
    option = storage.run(
        nvme_partition.context(config(dataset_path="/data"), RunOptions(dataset_path="/other"))
    )
    assert option.data["resolved_path"] == "/other"
    assert option.data["mount_point"] == "/"


def test_missing_path_fails(nvme_partition):
    result = run(nvme_partition, path="/nope")
    assert result.status == Status.FAIL
    assert finding(result, "path").measured == "missing"
    assert "dataset_staging_mount" in result.remedy


def test_symlinked_dataset_is_resolved(nvme_partition):
    _link(nvme_partition, "/home/user/data", "/data")
    mountinfo(nvme_partition, mount_line("/data", "259:2", "ext4", "/dev/nvme0n1p2"))
    result = run(nvme_partition, config(read={"enabled": False}), path="/home/user/data")
    assert result.data["resolved_path"] == "/data"
    assert result.data["mount_point"] == "/data"


def test_schema_accepts_profiles_and_rejects_bad_values():
    schema = c.obj({"storage": storage.SCHEMA})
    c.validate({"storage": CONFIG}, schema, "test")
    for bad, key in (
        ({"min_free": "lots"}, "min_free"),
        ({"read_test": {"max_files": 0}}, "max_files"),
        ({"read_test": {"max_seconds": 0}}, "max_seconds"),
        ({"allow_rotational": "no"}, "allow_rotational"),
        ({"colour": 1}, "colour"),
    ):
        with pytest.raises(c.ConfigError, match=key):
            c.validate({"storage": bad}, schema, "test")


# ------------------------------------------------ O_DIRECT fallbacks (monkeypatched)


def _files(tmp: Path, sizes) -> list[tuple[Path, int]]:
    out = []
    for number, size in enumerate(sizes):
        path = tmp / f"f{number}"
        path.write_bytes(os.urandom(size))
        out.append((path, size))
    return out


def test_open_refusing_o_direct_falls_back_and_says_so(tmp_path, monkeypatch):
    files = _files(tmp_path, [10_000, 70_000])
    real_open = os.open

    def refusing(path, flags, *args, **kwargs):
        if flags & readspeed.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    result = readspeed.read_files(files, 10 * MiB, 64 * 1024, 30)
    assert result.cache_bypassed is False
    assert result.no_bypass_reason == "open with O_DIRECT refused (EINVAL)"
    assert (result.bytes, result.buffered_bytes, result.direct_bytes) == (80_000, 80_000, 0)


def _refusing_preadv(monkeypatch, refuse):
    real_open, real_preadv = os.open, os.preadv
    direct_fds = set()

    def opening(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & readspeed.O_DIRECT:
            direct_fds.add(fd)
        else:
            direct_fds.discard(fd)
        return fd

    def reading(fd, buffers, offset):
        if fd in direct_fds and refuse(offset):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(os, "open", opening)
    monkeypatch.setattr(os, "preadv", reading)


def test_read_refusing_o_direct_falls_back(tmp_path, monkeypatch):
    files = _files(tmp_path, [50_000])
    _refusing_preadv(monkeypatch, lambda offset: True)
    result = readspeed.read_files(files, MiB, 4096, 30)
    assert result.no_bypass_reason == "read with O_DIRECT refused (EINVAL)"
    assert (result.bytes, result.buffered_bytes) == (50_000, 50_000)


def test_refused_unaligned_tail_is_read_buffered(tmp_path, monkeypatch):
    files = _files(tmp_path, [3 * 4096 + 100])
    _refusing_preadv(monkeypatch, lambda offset: offset >= 3 * 4096)
    result = readspeed.read_files(files, MiB, 4096, 30)
    assert result.cache_bypassed is True
    assert result.tails_buffered == 1
    assert (result.direct_bytes, result.buffered_bytes) == (3 * 4096, 100)


def test_unreadable_file_warns(nvme_partition, monkeypatch):
    real_open = os.open
    blocked = str(nvme_partition.root / "data" / "shard-001.bin")

    def denying(path, flags, *args, **kwargs):
        if os.fspath(path) == blocked:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denying)
    result = run(nvme_partition)
    through = finding(result, "read throughput")
    assert through.status == Status.WARN
    assert result.data["read"]["error_count"] == 1
    assert result.data["read"]["files"] == 2
    assert "Permission denied" in through.display


def test_max_seconds_stops_the_read(tmp_path):
    files = _files(tmp_path, [8192] * 5)
    ticks = iter(range(1000))
    result = readspeed.read_files(files, MiB, 4096, 3.5, clock=lambda: float(next(ticks)))
    assert result.stopped_by == "max_seconds"
    assert 0 < result.bytes < 5 * 8192
    assert result.bytes_per_s == result.bytes / result.seconds
    assert (result.files, result.seconds, result.to_dict()["files_per_s"]) == (1, 5.0, 0.2)


# ---------------------------------------------------------------- property tests


@given(st.integers(0, 2**32), st.integers(0, 2**32))
def test_devnum_round_trip(major, minor):
    assert blockdev.parse_devnum(f"{major}:{minor}\n") == (major, minor)


@given(st.text())
def test_devnum_never_crashes_otherwise(text):
    try:
        major, minor = blockdev.parse_devnum(text)
    except ValueError:
        return
    assert f"{major}:{minor}" == text.strip()


KEY = st.text(
    st.characters(blacklist_characters="=\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), min_size=1
).filter(lambda s: s.strip() == s and s)
VALUE = st.text(st.characters(blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"))


@given(st.dictionaries(KEY, VALUE.map(str.strip)))
def test_uevent_round_trip(values):
    text = "".join(f"{k}={v}\n" for k, v in values.items())
    assert blockdev.parse_uevent(text) == values


@given(st.text())
def test_uevent_never_crashes(text):
    parsed = blockdev.parse_uevent(text)
    assert all("\n" not in k and k for k in parsed)


@given(st.one_of(st.none(), st.text()))
def test_dm_kind_total(uuid):
    assert blockdev.dm_kind(uuid) in {
        "lvm",
        "crypt",
        "multipath",
        "dm-partition",
        "stratis",
        "vdo",
        "dm",
    }


@given(st.text(), st.text())
def test_disk_kind_total(name, path):
    assert blockdev.disk_kind(name, path) in {
        "nvme",
        "loop",
        "zram",
        "mmc",
        "xen",
        "rbd",
        "nbd",
        "pmem",
        "ram",
        "virtio",
        "scsi",
        "other",
    }


@given(st.text(), st.integers(0, 4095), st.text())
def test_classify_total(fs_type, major, source):
    kind = storage.classify(fs_type, major, source)
    assert kind in {"network", "memory", "overlay", "block", "other"}
    if fs_type.lower() in storage.NETWORK_FS:
        assert kind == "network"


@given(st.sampled_from(sorted(storage.NETWORK_FUSE)), st.sampled_from(["fuse", "FUSE"]))
def test_fuse_network_clients(subtype, fuse):
    assert storage.classify(f"{fuse}.{subtype}", 0, "x") == "network"


@given(st.lists(st.sampled_from(["rw", "ro", "noatime", "relatime", "nodev", "lazytime"])))
def test_atime_mode(options):
    mode = storage.atime_mode(options)
    if "noatime" in options:
        assert mode == "noatime"
    elif "relatime" in options:
        assert mode == "relatime"
    else:
        assert mode == "strictatime"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(1, 3 * 65536 + 1), min_size=1, max_size=4),
    st.sampled_from([4096, 8192, 65536, 5000]),
)
def test_read_files_reads_every_byte_once(sizes, block):
    """Whatever the file sizes (aligned or not) and block size, the bytes read are the file
    sizes exactly, and every byte is counted as direct or buffered."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        files = _files(Path(tmp), sizes)
        result = readspeed.read_files(files, 10**12, block, 60)
    assert result.bytes == sum(sizes)
    assert result.direct_bytes + result.buffered_bytes == result.bytes
    assert result.files == len(sizes)
    assert result.error_count == 0


# ---------------------------------------------------------------- real machine


def _findmnt(path: str) -> dict:
    out = subprocess.run(
        ["findmnt", "-T", path, "-J"], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out)["filesystems"][0]


def _lsblk_leaves(source: str) -> list[tuple[str, bool]]:
    """Bottom devices of `lsblk -s` (inverse tree: children are the devices below)."""
    out = subprocess.run(
        ["lsblk", "-J", "-s", "-o", "NAME,TYPE,ROTA", source],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    leaves = []

    def walk(node):
        if not node.get("children"):
            leaves.append((node["name"], bool(node["rota"])))
        for child in node.get("children", []):
            walk(child)

    for node in json.loads(out)["blockdevices"]:
        walk(node)
    return sorted(set(leaves))


def _df_avail(path: str) -> int:
    out = subprocess.run(
        ["df", "-B1", "--output=avail", path], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[-1])


def _direct_read_works(path: str) -> bool:
    done = subprocess.run(
        ["dd", f"if={path}", "of=/dev/null", "bs=4096", "count=1", "iflag=direct"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0


def _real(path: str, **overrides):
    ctx = CheckContext(System(), config(**overrides), RunOptions(dataset_path=path))
    return storage.run(ctx)


def _compare_with_tools(result, path: str) -> None:
    found = _findmnt(path)
    assert result.data["mount_point"] == found["target"]
    assert result.data["fs_type"] == found["fstype"]
    assert result.data["source"] == found["source"]
    assert set(found["options"].split(",")) <= set(result.data["options"])


@pytest.mark.real
def test_real_directory_on_root_fs():
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        for number in range(3):
            Path(tmp, f"part-{number}").write_bytes(os.urandom(3 * MiB + 123))
        result = _real(tmp, allow_rotational=True, min_free="1MiB")
        _compare_with_tools(result, tmp)
        source = result.data["source"]
        if not source.startswith("/dev/"):
            pytest.skip(f"the root file system comes from {source}, not a block device")
        disks = [(d["name"], d["rotational"]) for d in result.data["block"]["disks"]]
        assert disks == _lsblk_leaves(source)
        avail = _df_avail(tmp)
        assert abs(result.data["free_bytes"] - avail) < 256 * MiB
        read = result.data["read"]
        assert read["bytes"] == 3 * (3 * MiB + 123)
        direct = _direct_read_works(f"{tmp}/part-0")
        assert read["cache_bypassed"] is direct
        if direct:  # the unaligned tails (123 bytes) came back from short O_DIRECT reads
            assert (read["buffered_bytes"], read["tails_buffered"]) == (0, 0)
        assert finding(result, "read throughput").status == Status.PASS


def _need_root_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to set up loop devices and mounts")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing tools: {', '.join(missing)}")


def _sh(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout.strip()


def _mbr_with_one_partition(image: Path, size: int) -> None:
    table = bytearray(512)
    start = 2048
    entry = struct.pack(
        "<B3sB3sII", 0, b"\x00\x21\x00", 0x83, b"\xfe\xff\xff", start, size // 512 - start
    )
    table[446:462] = entry
    table[510:512] = b"\x55\xaa"
    with open(image, "r+b") as handle:
        handle.write(table)


@pytest.mark.real
def test_real_loop_partition_with_ext4():
    _need_root_tools("losetup", "partx", "mkfs.ext4", "mount", "umount", "lsblk", "findmnt")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        image, point = Path(tmp, "disk.img"), Path(tmp, "mnt")
        point.mkdir()
        size = 64 * MiB
        with open(image, "wb") as handle:
            handle.truncate(size)
        _mbr_with_one_partition(image, size)
        loop = part = None
        mounted = False
        try:
            loop = _sh("losetup", "-f", "--show", "-P", str(image))
            part = f"{loop}p1"
            if not os.path.exists(part):
                subprocess.run(["partx", "-a", loop], capture_output=True, check=False)
            if not os.path.exists(part):
                pytest.skip(f"the kernel made no partition device for {loop}")
            _sh("mkfs.ext4", "-q", "-F", part)
            _sh("mount", "-o", "noatime", part, str(point))
            mounted = True
            for number in range(4):
                Path(point, f"s{number}").write_bytes(os.urandom(2 * MiB + 7))
            result = _real(str(point), allow_rotational=True)
            _compare_with_tools(result, str(point))
            block = result.data["block"]
            name = os.path.basename(loop)
            assert block["device"] == f"{name}p1"
            assert block["stack"]["type"] == "partition"
            assert [d["name"] for d in block["disks"]] == [name]
            assert [(d["name"], d["rotational"]) for d in block["disks"]] == _lsblk_leaves(part)
            assert block["disks"][0]["kind"] == "loop"
            assert block["disks"][0]["backing_file"] == str(image)
            assert block["disks"][0]["size_bytes"] == int(_sh("blockdev", "--getsize64", loop))
            assert finding(result, "mount options").status == Status.PASS
            assert abs(result.data["free_bytes"] - _df_avail(str(point))) < MiB
            read = result.data["read"]
            assert read["bytes"] == 4 * (2 * MiB + 7)
            assert read["cache_bypassed"] is _direct_read_works(f"{point}/s0") is True
            assert result.status == Status.PASS, result.summary
        finally:
            if mounted:
                subprocess.run(["umount", str(point)], check=False)
            if loop:
                subprocess.run(["partx", "-d", loop], capture_output=True, check=False)
                subprocess.run(["losetup", "-d", loop], check=False)


@pytest.mark.real
def test_real_ramfs_refuses_o_direct():
    _need_root_tools("mount", "umount", "findmnt", "dd")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        done = subprocess.run(
            ["mount", "-t", "ramfs", "ramfs", tmp], capture_output=True, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount ramfs: {done.stderr!r}")
        try:
            Path(tmp, "a").write_bytes(os.urandom(MiB))
            result = _real(tmp)
            _compare_with_tools(result, tmp)
            assert result.data["storage_kind"] == "memory"
            read = result.data["read"]
            assert read["bytes"] == MiB
            direct = _direct_read_works(f"{tmp}/a")
            assert read["cache_bypassed"] is False
            if not direct:
                assert read["no_bypass_reason"] == "open with O_DIRECT refused (EINVAL)"
                assert (
                    "ramfs: open with O_DIRECT refused"
                    in finding(result, "read throughput").display
                )
        finally:
            subprocess.run(["umount", tmp], check=False)


@pytest.mark.real
def test_real_dev_shm_is_memory():
    if not os.path.ismount("/dev/shm"):
        pytest.skip("/dev/shm is not a mount point here")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        Path(tmp, "a").write_bytes(os.urandom(MiB + 1))
        # other tests' workers share /dev/shm: its free space is known only around the read
        before = _df_avail(tmp)
        result = _real(tmp)
        after = _df_avail(tmp)
        _compare_with_tools(result, tmp)
        assert result.data["storage_kind"] == "memory"
        read = result.data["read"]
        assert read["bytes"] == MiB + 1
        assert read["cache_bypassed"] is False
        if _direct_read_works(f"{tmp}/a"):  # tmpfs takes O_DIRECT since Linux 6.6
            assert "RAM" in read["no_bypass_reason"]
        else:
            assert "EINVAL" in read["no_bypass_reason"]
        low, high = sorted((before, after))
        assert low - 16 * MiB <= result.data["free_bytes"] <= high + 16 * MiB


@pytest.mark.real
def test_real_device_mapper_over_two_loops():
    _need_root_tools("dmsetup", "losetup", "blockdev", "lsblk")
    if subprocess.run(["dmsetup", "version"], capture_output=True, check=False).returncode:
        pytest.skip("no device-mapper in this kernel (dmsetup version fails)")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        loops: list[str] = []
        name = f"hostcheck-test-{os.getpid()}"
        created = False
        try:
            for number in range(2):
                image = Path(tmp, f"{number}.img")
                with open(image, "wb") as handle:
                    handle.truncate(16 * MiB)
                loops.append(_sh("losetup", "-f", "--show", str(image)))
            sectors = 16 * MiB // 512
            table = f"0 {sectors} linear {loops[0]} 0\n{sectors} {sectors} linear {loops[1]} 0\n"
            subprocess.run(["dmsetup", "create", name], input=table, text=True, check=True)
            created = True
            major, minor = (
                int(x)
                for x in _sh(
                    "dmsetup", "info", "-c", "--noheadings", "-o", "major,minor", name
                ).split(":")
            )
            res = blockdev.resolve_devnum(System(), major, minor)
            expected = _lsblk_leaves(f"/dev/mapper/{name}")
            assert [(d.name, d.rotational) for d in res.disks] == expected
            assert res.tree.type == "dm" and res.tree.detail == name
        finally:
            if created:
                subprocess.run(["dmsetup", "remove", name], check=False)
            for loop in loops:
                subprocess.run(["losetup", "-d", loop], check=False)
