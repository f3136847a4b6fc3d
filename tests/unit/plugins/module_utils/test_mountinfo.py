"""One mountinfo reader (plugins/module_utils/mountinfo.py) for hostcheck and the
dataset_staging role's disk probe: both see the same mount points, escapes included (the
probe used to undo only \\040, so a tab or backslash in a mount point was read wrong)."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.modules import dataset_disk_probe as probe

from hostcheck.mounts import parse_mountinfo

MOUNTINFO = (
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "40 22 259:5 / /data/my\\040set rw,noatime shared:9 - xfs /dev/md0 rw,attr2\n"
    "41 22 259:6 / /data/tab\\011and\\134slash rw - xfs /dev/nvme1n1 rw\n"
)


def test_the_probe_and_hostcheck_read_the_same_mounts(monkeypatch):
    monkeypatch.setattr(probe, "_read", lambda path, default="": MOUNTINFO)
    seen_by_probe = [(m["target"], m["source"], m["fstype"]) for m in probe._mountinfo()]
    seen_by_hostcheck = [(m.mount_point, m.source, m.fs_type) for m in parse_mountinfo(MOUNTINFO)]
    assert seen_by_probe == seen_by_hostcheck
    assert seen_by_probe[2][0] == "/data/tab\tand\\slash"
    assert [m["majmin"] for m in probe._mountinfo()] == ["259:2", "259:5", "259:6"]
