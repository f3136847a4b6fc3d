import contextlib

import pytest
from hostcheck._shared.mountinfo import unescape
from hypothesis import given
from hypothesis import strategies as st

from hostcheck.mounts import escape, mount_for, parse_mountinfo

MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw,errors=remount-ro
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=4096k,mode=755
25 24 0:23 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs rw,size=65536k
40 24 0:45 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=16777216k
41 22 259:2 / /data rw,noatime shared:30 - xfs /dev/nvme0n1p1 rw,attr2,inode64
42 22 0:50 /exports /mnt/my\\040data rw,relatime - nfs4 srv:/exports rw,vers=4.2
"""


def test_parses_fields_and_optional_fields():
    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 7
    data = mounts[5]
    assert (data.major, data.minor, data.mount_point, data.fs_type) == (259, 2, "/data", "xfs")
    assert data.source == "/dev/nvme0n1p1"
    assert "noatime" in data.options
    assert data.option("inode64") == ""
    assert mounts[3].option("size") == "65536k"


def test_stacked_mounts_the_last_one_wins():
    shm = mount_for(parse_mountinfo(MOUNTINFO), "/dev/shm")
    assert shm is not None and shm.source == "shm" and shm.option("size") == "16777216k"


def test_longest_prefix_and_escaped_names():
    mounts = parse_mountinfo(MOUNTINFO)
    assert mount_for(mounts, "/data/imagenet/train").mount_point == "/data"
    assert mount_for(mounts, "/database").mount_point == "/"
    assert mount_for(mounts, "/mnt/my data/x").fs_type == "nfs4"


def test_malformed_line_names_the_line():
    with pytest.raises(ValueError, match="line 2"):
        parse_mountinfo("22 1 253:1 / / rw - ext4 /dev/sda1 rw\ngarbage here\n")


names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
    min_size=1,
    max_size=12,
)


@given(st.lists(names, min_size=1, max_size=4), names)
def test_round_trip_of_escaped_mount_points(parts, source):
    point = "/" + "/".join(parts)
    line = f"30 1 8:1 / {escape(point)} rw,noatime - ext4 {escape(source)} rw\n"
    (mount,) = parse_mountinfo(line)
    assert mount.mount_point == point
    assert mount.source == source
    assert unescape(escape(point)) == point


@given(st.text(max_size=200))
def test_arbitrary_text_parses_or_raises_valueerror(text):
    with contextlib.suppress(ValueError):
        parse_mountinfo(text)
