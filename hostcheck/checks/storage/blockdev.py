"""Block devices through sysfs: from a mount's major:minor down to the physical disks.

`/sys/dev/block/MAJ:MIN` links to the device's directory under /sys/devices. A partition's
directory sits inside its disk's directory (and holds a `partition` file); device mapper
(dm-*) and md RAID (md*) devices list the devices they are built on in `slaves/`. Following
those links down, recursively, ends at the disks that hold the data.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import asdict, dataclass, field

from hostcheck._shared.sizes import format_size
from hostcheck.system import System

SECTOR = 512  # sysfs `size` is always in 512-byte sectors, whatever the logical block size
MAX_DEPTH = 16  # a device stack deeper than this is a loop in the fixture, not a real host

_DEVNUM = re.compile(r"^\s*(\d+):(\d+)\s*$")
_REMOTE_NVME = ("tcp", "rdma", "fc")


def parse_devnum(text: str) -> tuple[int, int]:
    """'259:0' (a sysfs `dev` file or a mountinfo field) as (major, minor)."""
    match = _DEVNUM.match(text)
    if not match:
        raise ValueError(f"not a device number MAJOR:MINOR: {text!r}")
    return int(match.group(1)), int(match.group(2))


def parse_uevent(text: str) -> dict[str, str]:
    """KEY=VALUE lines of a sysfs `uevent` file; other lines are ignored."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            values[key.strip()] = value.strip()
    return values


def dm_kind(uuid: str | None) -> str:
    """What a device-mapper device is, from the prefix of its dm/uuid."""
    prefix = (uuid or "").split("-", 1)[0].upper()
    return {
        "LVM": "lvm",
        "CRYPT": "crypt",
        "MPATH": "multipath",
        "PART1": "dm-partition",
        "STRATIS": "stratis",
        "VDO": "vdo",
    }.get(prefix, "dm")


def disk_kind(name: str, sysfs_dir: str) -> str:
    """The kind of a bottom-level disk, from its kernel name and where it sits in sysfs."""
    for prefix, kind in (
        ("nvme", "nvme"),
        ("loop", "loop"),
        ("zram", "zram"),
        ("mmcblk", "mmc"),
        ("xvd", "xen"),
        ("rbd", "rbd"),
        ("nbd", "nbd"),
        ("pmem", "pmem"),
        ("ram", "ram"),
    ):
        if name.startswith(prefix):
            return kind
    if "/virtio" in sysfs_dir:
        return "virtio"
    if name.startswith(("sd", "sr")):
        return "scsi"
    return "other"


@dataclass(frozen=True)
class Disk:
    """A bottom-level device: nothing below it in sysfs."""

    name: str
    kind: str  # nvme, scsi, virtio, loop, zram, mmc, xen, rbd, nbd, pmem, other
    nvme: bool
    rotational: bool | None  # queue/rotational; None when sysfs does not say
    model: str | None
    size_bytes: int | None
    transport: str | None = None  # nvme: pcie, tcp, rdma, fc, loop; scsi: iscsi
    remote: bool = False  # reached over a network: NVMe-oF, iSCSI, rbd, nbd
    backing_file: str | None = None  # loop devices: the file behind them

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        parts = [self.kind]
        if self.transport and self.transport != "pcie":
            parts.append(self.transport)
        if self.rotational is not None:
            parts.append("rotational" if self.rotational else "non-rotational")
        if self.model:
            parts.append(self.model)
        if self.size_bytes is not None:
            parts.append(format_size(self.size_bytes))
        if self.backing_file:
            parts.append(f"file {self.backing_file}")
        return f"{self.name} ({', '.join(parts)})"


@dataclass
class Node:
    """One device in the stack above the disks: disk, partition, md, lvm, crypt, dm ..."""

    name: str
    type: str
    detail: str | None = None  # md: raid level; dm: the mapper name
    children: list[Node] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "detail": self.detail,
            "children": [c.to_dict() for c in self.children],
        }

    def describe(self) -> str:
        """md0(raid1) <- [sda1 <- sda, sdb1 <- sdb]"""
        label = f"{self.name}({self.detail})" if self.detail else self.name
        if not self.children:
            return label
        if len(self.children) == 1:
            return f"{label} <- {self.children[0].describe()}"
        return f"{label} <- [{', '.join(c.describe() for c in self.children)}]"


@dataclass
class Resolution:
    device: str | None  # the mount's own device, e.g. md0, dm-0, nvme0n1p2
    tree: Node | None
    disks: list[Disk]
    problems: list[str] = field(default_factory=list)

    @property
    def rotational(self) -> list[Disk]:
        return [d for d in self.disks if d.rotational]

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "stack": self.tree.to_dict() if self.tree else None,
            "disks": [d.to_dict() for d in self.disks],
            "problems": list(self.problems),
        }


def host_realpath(system: System, path: str) -> str:
    """Follow symlinks in a host path, staying a host path (under the fixture root in tests)."""
    base = os.path.realpath(system.path("/"))
    real = os.path.realpath(system.path(path))
    relative = os.path.relpath(real, base)
    if relative == ".":
        return "/"
    if relative.startswith(".."):  # an absolute link that left the fixture root
        return real
    return "/" + relative


def read_disk(system: System, sysfs_dir: str) -> Disk:
    name = posixpath.basename(sysfs_dir)
    kind = disk_kind(name, sysfs_dir)
    rotational = system.read_int(f"{sysfs_dir}/queue/rotational")
    sectors = system.read_int(f"{sysfs_dir}/size")
    model = system.read_value(f"{sysfs_dir}/device/model") or None
    transport = None
    remote = kind in ("rbd", "nbd")
    if kind == "nvme":
        transport = system.read_value(f"{sysfs_dir}/device/transport") or None
        remote = transport in _REMOTE_NVME
    elif kind == "scsi" and "/session" in sysfs_dir:
        transport, remote = "iscsi", True
    backing = system.read_value(f"{sysfs_dir}/loop/backing_file") if kind == "loop" else None
    return Disk(
        name=name,
        kind=kind,
        nvme=kind == "nvme",
        rotational=None if rotational is None else rotational != 0,
        model=model,
        size_bytes=None if sectors is None else sectors * SECTOR,
        transport=transport,
        remote=remote,
        backing_file=backing or None,
    )


def _node_for(system: System, sysfs_dir: str, slaves: list[str]) -> Node:
    name = posixpath.basename(sysfs_dir)
    if system.exists(f"{sysfs_dir}/md"):
        return Node(name, "md", system.read_value(f"{sysfs_dir}/md/level"))
    if system.exists(f"{sysfs_dir}/dm"):
        kind = dm_kind(system.read_value(f"{sysfs_dir}/dm/uuid"))
        return Node(name, kind, system.read_value(f"{sysfs_dir}/dm/name"))
    if slaves:
        return Node(name, "stacked")
    return Node(name, "disk")


def _walk(
    system: System, sysfs_dir: str, disks: dict[str, Disk], problems: list[str], depth: int
) -> Node:
    name = posixpath.basename(sysfs_dir)
    if depth > MAX_DEPTH:
        problems.append(f"{name}: device stack deeper than {MAX_DEPTH}, stopped")
        return Node(name, "unknown")
    if system.exists(f"{sysfs_dir}/partition"):
        node = Node(name, "partition", system.read_value(f"{sysfs_dir}/partition"))
        parent = posixpath.dirname(sysfs_dir)
        if system.exists(f"{parent}/dev"):
            node.children.append(_walk(system, parent, disks, problems, depth + 1))
        else:
            problems.append(f"{name}: partition without a parent disk in sysfs")
        return node
    slaves = system.listdir(f"{sysfs_dir}/slaves")
    node = _node_for(system, sysfs_dir, slaves)
    for slave in slaves:
        below = host_realpath(system, f"{sysfs_dir}/slaves/{slave}")
        node.children.append(_walk(system, below, disks, problems, depth + 1))
    if not slaves:
        if node.type != "disk":
            problems.append(f"{name}: {node.type} device without slaves in sysfs")
        disks.setdefault(name, read_disk(system, sysfs_dir))
    return node


def resolve_dir(system: System, sysfs_dir: str) -> Resolution:
    disks: dict[str, Disk] = {}
    problems: list[str] = []
    tree = _walk(system, sysfs_dir, disks, problems, 0)
    return Resolution(tree.name, tree, sorted(disks.values(), key=lambda d: d.name), problems)


def resolve_devnum(system: System, major: int, minor: int) -> Resolution:
    """The device stack and physical disks under block device MAJOR:MINOR."""
    link = f"/sys/dev/block/{major}:{minor}"
    if not system.exists(f"{link}/dev"):
        return Resolution(None, None, [], [f"{link} not found"])
    return resolve_dir(system, host_realpath(system, link))


def resolve_name(system: System, name: str) -> Resolution:
    """The same from a kernel device name (sda1, dm-0), through /sys/class/block."""
    link = f"/sys/class/block/{name}"
    if not name or "/" in name or not system.exists(f"{link}/dev"):
        return Resolution(None, None, [], [f"{link} not found"])
    return resolve_dir(system, host_realpath(system, link))
