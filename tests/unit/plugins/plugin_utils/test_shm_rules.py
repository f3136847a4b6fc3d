"""The shm role's rules on plain data: shm_size and shm_mount_options (each bad value named), what
shm_probe reads (fixture files), the plan the validate action makes from it (what must change,
the refusal to shrink), and the verify action's comparison; the messages are those the
integration tests and operators look for."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import shm_probe
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.shm_rules import (
    fstab_options,
    shm_plan,
    shm_values,
    shm_verified,
)

MiB = 2**20
MEMTOTAL_KIB = 16 * 2**20  # 16 GiB of RAM
MOUNT_OPTIONS = ["nosuid", "nodev"]
IN_LINE = "tmpfs /dev/shm tmpfs nosuid,nodev,size=268435456 0 0"


def line(text: str) -> dict:
    (found,) = shm_probe.fstab_lines(text, "/dev/shm")
    return found


def probe(fstab=(IN_LINE,), size=256 * MiB, used=0, options=("rw", *MOUNT_OPTIONS), fstype="tmpfs"):
    return {
        "live": {
            "fstype": fstype,
            "source": "tmpfs",
            "options": list(options),
            "size": size,
            "used": used,
        },
        "fstab": [line(text) for text in fstab],
        "memtotal_kib": MEMTOTAL_KIB,
    }


def plan(found: dict, size: object = "256m", refuse: bool = True) -> dict:
    option = "50%" if size == "50%" else str(256 * MiB)
    return shm_plan(found, size, option, MOUNT_OPTIONS, refuse)


# ---------------------------------------------------------------- the probe


MOUNTINFO = (
    "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "25 22 0:23 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=65536k,inode64\n"
)


def test_the_probe_reads_the_mount_fstab_and_memtotal(tmp_path):
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    (tmp_path / "fstab").write_text(
        "# /etc/fstab\nUUID=ab / ext4 defaults 0 1\n"
        "tmpfs /dev/shm tmpfs defaults,noexec 0 0 # hardened\n"
        "tmpfs /dev/shm/ tmpfs size=1g\n"
    )
    (tmp_path / "meminfo").write_text("MemTotal:       16303428 kB\nMemFree: 1 kB\n")
    found = shm_probe.probe(
        {
            "path": "/dev/shm",
            "mountinfo": str(tmp_path / "mountinfo"),
            "fstab": str(tmp_path / "fstab"),
            "meminfo": str(tmp_path / "meminfo"),
        }
    )
    live = found["live"]
    assert (live["fstype"], live["source"]) == ("tmpfs", "tmpfs")
    assert live["options"] == ["rw", "nosuid", "nodev", "size=65536k", "inode64"]
    assert live["size"] > 0  # statvfs of this machine's /dev/shm
    assert found["fstab"] == [
        {
            "src": "tmpfs",
            "fstype": "tmpfs",
            "options": "defaults,noexec",
            "dump": "0",
            "passno": "0",
        },
        {"src": "tmpfs", "fstype": "tmpfs", "options": "size=1g", "dump": None, "passno": None},
    ]
    assert found["memtotal_kib"] == 16303428


def test_the_probe_finds_nothing_mounted_and_no_fstab_line(tmp_path):
    (tmp_path / "mountinfo").write_text(MOUNTINFO.splitlines()[0] + "\n")
    found = shm_probe.probe(
        {
            "path": "/dev/shm",
            "mountinfo": str(tmp_path / "mountinfo"),
            "fstab": str(tmp_path / "missing"),
            "meminfo": str(tmp_path / "missing"),
        }
    )
    assert found == {"live": None, "fstab": [], "memtotal_kib": None}


# ---------------------------------------------------------------- the plan


def test_nothing_changes_when_fstab_and_the_mount_match():
    assert plan(probe()) == {
        "bytes": 256 * MiB,
        "fstab_line": f"tmpfs /dev/shm tmpfs nosuid,nodev,size={256 * MiB} 0 0",
        "source": "tmpfs",
        "changes": [],
    }


@pytest.mark.parametrize(
    ("found", "changes"),
    [
        (probe(fstab=()), ["fstab"]),
        # what the role rewrites: no dump and passno, another source or size
        (probe(fstab=("tmpfs /dev/shm tmpfs nosuid,nodev,size=268435456",)), ["fstab"]),
        (probe(fstab=("none /dev/shm tmpfs nosuid,nodev,size=268435456 0 0",)), ["fstab"]),
        (probe(fstab=("tmpfs /dev/shm tmpfs nosuid,nodev,size=1g 0 0",)), ["fstab"]),
        # the options in another order are kept as they are
        (probe(fstab=("tmpfs /dev/shm tmpfs nodev,nosuid,size=268435456 0 0",)), []),
        (probe(fstab=(IN_LINE, "tmpfs /dev/shm tmpfs size=1g 0 0")), ["fstab"]),
        (probe(size=64 * MiB), ["live"]),
        (probe(options=("rw", "nosuid")), ["live"]),
        (probe(fstype="devtmpfs"), ["live"]),
        ({**probe(fstab=()), "live": None}, ["fstab", "live"]),
    ],
)
def test_what_is_out_of_line_changes(found, changes):
    assert plan(found)["changes"] == changes


def test_options_another_role_wrote_are_kept_and_size_put_back():
    hardened = line("tmpfs /dev/shm tmpfs defaults,nodev,nosuid,noexec 0 0")
    assert fstab_options([hardened], MOUNT_OPTIONS, "268435456") == [
        "nodev",
        "nosuid",
        "noexec",
        "size=268435456",
    ]
    assert fstab_options([], MOUNT_OPTIONS, "50%") == ["nosuid", "nodev", "size=50%"]


def test_a_percentage_is_taken_of_the_ram_pages():
    found = probe(fstab=("tmpfs /dev/shm tmpfs nosuid,nodev,size=50% 0 0",), size=8 * 2**30)
    assert plan(found, "50%") == {
        "bytes": 8 * 2**30,
        "fstab_line": "tmpfs /dev/shm tmpfs nosuid,nodev,size=50% 0 0",
        "source": "tmpfs",
        "changes": [],
    }


def test_shrinking_below_what_is_held_is_refused_unless_allowed():
    held = probe(size=512 * MiB, used=300 * MiB)
    with pytest.raises(Invalid) as refused:
        plan(held)
    assert str(refused.value) == (
        f"shm_size: 256m ({256 * MiB} bytes) is less than the {300 * MiB} bytes /dev/shm holds "
        "now; not shrinking it. Free /dev/shm (stale torch_* segments of dead jobs) or choose "
        "a larger shm_size."
    )
    assert plan(held, refuse=False)["changes"] == ["live"]
    assert plan(probe(used=200 * MiB))["changes"] == []


# ---------------------------------------------------------------- verify


def test_verified_when_fstab_and_the_mount_hold_shm_size():
    assert shm_verified(probe(), "256m", str(256 * MiB), MOUNT_OPTIONS) == (
        f"/dev/shm is {256 * MiB} bytes, as fstab says"
    )


def test_drift_is_named_with_both_lines():
    """A hardening role rewrote the fstab line without size= and remounted /dev/shm smaller."""
    drifted = probe(
        fstab=("tmpfs /dev/shm tmpfs defaults,nodev,nosuid,noexec 0 0",),
        size=64 * MiB,
        options=("rw", "nosuid", "noexec"),
    )
    with pytest.raises(Invalid) as failed:
        shm_verified(drifted, "256m", str(256 * MiB), MOUNT_OPTIONS)
    assert str(failed.value) == (
        "/dev/shm does not match shm_size=256m: fstab has 'tmpfs defaults,nodev,nosuid,noexec', "
        f"the mount has 'tmpfs {64 * MiB} rw,nosuid,noexec' (wanted {256 * MiB} bytes): the "
        f"fstab line lacks size={256 * MiB}; the mount is {64 * MiB} bytes; the mount lacks nodev"
    )


def test_nothing_mounted_and_no_fstab_line_fail():
    with pytest.raises(Invalid, match="fstab has 'none -', the mount has 'none 0 -'") as failed:
        shm_verified({**probe(fstab=()), "live": None}, "256m", str(256 * MiB), MOUNT_OPTIONS)
    assert str(failed.value).endswith(
        "fstab has no tmpfs line for /dev/shm; no tmpfs is mounted at /dev/shm"
    )


# ---------------------------------------------------------------- the action on this machine


def test_sizes_become_the_tmpfs_option():
    assert shm_values("50%", ["nosuid", "nodev"]) == {"option": "50%"}
    assert shm_values("1GiB", []) == {"option": str(1 << 30)}


@pytest.mark.parametrize("size", ["-1G", "12 parsecs", "150%", "64XB"])
def test_bad_sizes_name_shm_size(size):
    with pytest.raises(Invalid, match=r"^shm_size: "):
        shm_values(size, [])


@pytest.mark.parametrize("options", [["size=1G"], ["no spaces"], "nosuid", [1]])
def test_bad_options_name_shm_mount_options(options):
    with pytest.raises(Invalid, match=r"^shm_mount_options: "):
        shm_values("1G", options)
