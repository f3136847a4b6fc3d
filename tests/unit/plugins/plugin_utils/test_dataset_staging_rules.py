"""The dataset_staging role off the sandbox: its variables checked together, its disk
decisions as tables of what the probe could find, the probe on real loop devices of this
machine, and the md RAID commands and per-OS files it would use (this kernel has no md
driver, so the array itself is only rendered here)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import (
    dataset_disk_probe as probe_module,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    dataset_staging_disk_plan,
    dataset_staging_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.paths import CHECKOUT as REPO
from tests.support.dataset_staging import write_md_superblock

ROLE = REPO / "roles" / "dataset_staging"


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def given(**changes) -> dict:
    prefix = "dataset_staging_"
    base = {k[len(prefix) :]: v for k, v in defaults().items() if k != "dataset_staging_enabled"}
    return {**base, **changes}


def settings(**changes) -> dict:
    return dataset_staging_settings(given(**changes))


# ---------------------------------------------------------------- variables


def test_defaults_touch_no_disk_and_stage_nothing():
    s = settings()
    assert s["layout"] == "none"
    assert s["datasets"] == []
    assert s["mount"] == "/data"
    assert s["state_dir"] == "/data/.dataset-staging"
    assert s["mount_options"] == ["noatime", "nofail"]


def test_layout_follows_the_number_of_disks_and_the_file_system():
    one = ["/dev/disk/by-id/nvme-a"]
    two = ["/dev/disk/by-id/nvme-a", "/dev/disk/by-id/nvme-b"]
    assert settings(devices=one)["layout"] == "single"
    assert settings(devices=two)["layout"] == "md"
    assert settings(devices=two, filesystem="ext4")["layout"] == "md"
    assert settings(devices=two, filesystem="btrfs")["layout"] == "btrfs"
    assert settings(devices=two, raid_chunk="1M")["raid_chunk_kib"] == 1024


def test_datasets_are_normalised_with_their_destinations():
    s = settings(
        datasets=[
            {"name": "imagenet", "source": "/mnt/nfs/imagenet/"},
            {"name": "coco", "source": "/srv/coco", "from": "controller", "hot": True},
        ]
    )
    first, second = s["datasets"]
    assert first == {
        "name": "imagenet",
        "variable": "dataset_staging_datasets[imagenet]",
        "source": "/mnt/nfs/imagenet",
        "side": "node",
        "manifest": None,
        "hot": False,
        "dest": "/data/imagenet",
        "hot_dest": "/dev/shm/datasets/imagenet",
    }
    assert second["side"] == "controller" and second["hot"] is True


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"mount": "data"}, "dataset_staging_mount: an absolute path; got 'data'"),
        ({"mount": "/"}, "dataset_staging_mount: a folder of its own"),
        ({"mount": "/data/../etc"}, "dataset_staging_mount: a plain absolute path"),
        ({"devices": ["sdb"]}, "dataset_staging_devices[0]: a path under /dev"),
        (
            {"devices": ["/dev/sdb", "/dev/sdb"]},
            "dataset_staging_devices: a device is listed twice",
        ),
        ({"label": "much-too-long-for-xfs"}, "dataset_staging_label: 1 to 12 characters for xfs"),
        ({"raid_chunk": "3K"}, "dataset_staging_raid_chunk: a power of two"),
        ({"raid_name": "a/b"}, "dataset_staging_raid_name"),
        ({"hot_root": "/data/hot"}, "dataset_staging_hot_root: a folder apart"),
        ({"mount_options": ["noatime,nodev"]}, "dataset_staging_mount_options"),
        (
            {"datasets": [{"name": "a", "source": "rel/path"}]},
            "dataset_staging_datasets[0].source: an absolute path",
        ),
        ({"datasets": [{"name": "a b", "source": "/x"}]}, "dataset_staging_datasets[0].name"),
        (
            {"datasets": [{"name": "a", "source": "/x"}, {"name": "a", "source": "/y"}]},
            "dataset_staging_datasets: the name 'a' is used twice",
        ),
        (
            {"datasets": [{"name": "a", "source": "/x", "manifest": "m.sha256"}]},
            "dataset_staging_datasets[0].manifest",
        ),
    ],
)
def test_bad_input_names_the_variable(changes, named):
    with pytest.raises(Invalid) as raised:
        settings(**changes)
    assert named in str(raised.value)


def test_btrfs_is_refused_on_the_rhel_family():
    with pytest.raises(Invalid, match="dataset_staging_filesystem: btrfs is not shipped"):
        dataset_staging_settings(given(filesystem="btrfs"), "RedHat")
    assert dataset_staging_settings(given(filesystem="btrfs"), "Debian")["filesystem"] == "btrfs"


# ---------------------------------------------------------------- disk decisions

ONE = ["/dev/disk/by-id/nvme-a"]
TWO = ["/dev/disk/by-id/nvme-a", "/dev/disk/by-id/nvme-b"]


def disk(letter: str, **facts) -> dict:
    base = {
        "path": f"/dev/disk/by-id/nvme-{letter}",
        "device": f"/dev/loop{ord(letter) - ord('a')}",
        "name": f"loop{ord(letter) - ord('a')}",
        "size": 4 * 2**30,
        "signatures": [],
        "partitions": [],
        "mounts": [],
        "swap": False,
        "holders": [],
    }
    return {**base, **facts}


def probe(*disks, **facts) -> dict:
    base = {
        "devices": list(disks),
        "unmatched": [],
        "problems": [],
        "mounted_at_mount": {},
        "fstab": {},
        "md": {},
    }
    return {**base, **facts}


XFS = {"type": "xfs", "uuid": "1111-2222", "label": "data", "usage": "filesystem", "offset": "0x0"}
EXT4 = {
    "type": "ext4",
    "uuid": "3333-4444",
    "label": "scratch",
    "usage": "filesystem",
    "offset": "0x438",
}
GPT = {"type": "gpt", "uuid": "", "label": "", "usage": "partition table", "offset": "0x200"}
MD = {
    "type": "linux_raid_member",
    "uuid": "5555",
    "label": "oldhost:0",
    "usage": "raid",
    "offset": "0x1000",
}


def test_a_blank_disk_is_formatted():
    plan = dataset_staging_disk_plan(probe(disk("a")), settings(devices=ONE))
    assert plan == {"action": "create", "target": "/dev/loop0", "refusals": [], "wipe": []}


def test_our_file_system_is_reused_when_mounted_or_in_fstab():
    mounted = probe(
        disk("a", signatures=[XFS], mounts=["/data"]),
        mounted_at_mount={"device": "/dev/loop0", "fstype": "xfs"},
    )
    assert dataset_staging_disk_plan(mounted, settings(devices=ONE))["action"] == "reuse"
    listed = probe(
        disk("a", signatures=[XFS]),
        fstab={"src": "UUID=1111-2222", "fstype": "xfs", "opts": "noatime"},
    )
    plan = dataset_staging_disk_plan(listed, settings(devices=ONE))
    assert (plan["action"], plan["uuid"]) == ("reuse", "1111-2222")


@pytest.mark.parametrize(
    ("facts", "found"),
    [
        (
            {"signatures": [EXT4]},
            "holds a ext4 signature (label scratch, uuid 3333-4444); not formatting it",
        ),
        (
            {"signatures": [GPT], "partitions": ["loop0p1"]},
            "holds a gpt partition table; not formatting it",
        ),
        ({"partitions": ["loop0p1"]}, "has partitions loop0p1; not formatting it"),
        (
            {"signatures": [MD]},
            "holds an md RAID member signature (array oldhost:0); not formatting it",
        ),
        ({"signatures": [XFS]}, "holds a xfs signature (label data, uuid 1111-2222)"),
    ],
)
def test_a_disk_that_is_not_blank_is_refused_naming_it_and_what_it_holds(facts, found):
    plan = dataset_staging_disk_plan(probe(disk("a", **facts)), settings(devices=ONE))
    assert plan["action"] == "refuse"
    (refusal,) = plan["refusals"]
    assert refusal.startswith("dataset_staging_devices: /dev/disk/by-id/nvme-a (/dev/loop0) ")
    assert found in refusal
    assert "dataset_staging_force_format: true erases it" in refusal


def test_force_format_erases_what_is_only_a_signature():
    plan = dataset_staging_disk_plan(
        probe(disk("a", signatures=[EXT4])), settings(devices=ONE, force_format=True)
    )
    assert plan == {
        "action": "create",
        "target": "/dev/loop0",
        "refusals": [],
        "wipe": ["/dev/loop0"],
    }


@pytest.mark.parametrize(
    ("facts", "found"),
    [
        (
            {"signatures": [EXT4], "mounts": ["/srv/scratch"]},
            "is mounted at /srv/scratch; not touching it",
        ),
        ({"partitions": ["loop0p1"], "mounts": ["/boot"]}, "is mounted at /boot"),
        ({"swap": True}, "is in use as swap; not touching it"),
        ({"signatures": [MD], "holders": ["md127"]}, "is part of md127"),
    ],
)
def test_a_disk_in_use_is_refused_even_with_force(facts, found):
    plan = dataset_staging_disk_plan(
        probe(disk("a", **facts)), settings(devices=ONE, force_format=True)
    )
    assert plan["action"] == "refuse"
    assert plan["wipe"] == []
    assert any(found in refusal for refusal in plan["refusals"]), plan["refusals"]


def test_something_else_mounted_at_the_mount_point_is_refused():
    plan = dataset_staging_disk_plan(
        probe(disk("a"), mounted_at_mount={"device": "/dev/sdz1", "fstype": "ext4"}),
        settings(devices=ONE),
    )
    assert plan["refusals"] == [
        "dataset_staging_mount: /data already has /dev/sdz1 (ext4) mounted, not one of "
        "dataset_staging_devices; unmount it first"
    ]


def test_unmatched_patterns_and_partitions_are_refused():
    plan = dataset_staging_disk_plan(
        probe(
            unmatched=["/dev/disk/by-id/nvme-Samsung*"],
            problems=["/dev/sda1 is a partition; give whole disks"],
        ),
        settings(devices=ONE),
    )
    assert plan["refusals"] == [
        "dataset_staging_devices: /dev/disk/by-id/nvme-Samsung* matches no device",
        "dataset_staging_devices: /dev/sda1 is a partition; give whole disks",
    ]


def test_two_blank_disks_become_an_md_array():
    plan = dataset_staging_disk_plan(probe(disk("a"), disk("b")), settings(devices=TWO))
    assert (plan["action"], plan["target"]) == ("create", "/dev/md/data")


def test_our_md_array_is_reused_or_formatted():
    members = {"device": "/dev/md127", "members": ["/dev/loop0", "/dev/loop1"]}
    holders = {"signatures": [MD], "holders": ["md127"]}
    blank = probe(disk("a", **holders), disk("b", **holders), md={**members, "signatures": []})
    assert dataset_staging_disk_plan(blank, settings(devices=TWO))["action"] == "format"
    formatted = probe(
        disk("a", **holders),
        disk("b", **holders),
        md={**members, "signatures": [XFS]},
        mounted_at_mount={"device": "/dev/md127", "fstype": "xfs"},
    )
    plan = dataset_staging_disk_plan(formatted, settings(devices=TWO))
    assert (plan["action"], plan["target"]) == ("reuse", "/dev/md127")


def test_an_md_array_of_other_disks_under_our_name_is_refused():
    other = probe(
        disk("a"),
        disk("b"),
        md={"device": "/dev/md127", "members": ["/dev/sdx", "/dev/sdy"], "signatures": []},
    )
    plan = dataset_staging_disk_plan(other, settings(devices=TWO))
    assert plan["action"] == "refuse"
    assert (
        "dataset_staging_raid_name: /dev/md/data exists with members /dev/sdx, /dev/sdy"
        in plan["refusals"][0]
    )


def test_our_btrfs_over_two_disks_is_reused():
    fs = {**XFS, "type": "btrfs"}
    both = probe(
        disk("a", signatures=[fs], mounts=["/data"]),
        disk("b", signatures=[fs]),
        mounted_at_mount={"device": "/dev/loop0", "fstype": "btrfs"},
    )
    plan = dataset_staging_disk_plan(both, settings(devices=TWO, filesystem="btrfs"))
    assert plan["action"] == "reuse"


# ---------------------------------------------------------------- md RAID, rendered


def render_task_value(task_file: str, task_name: str, key: str, context: dict):
    tasks = yaml.safe_load((ROLE / "tasks" / task_file).read_text())
    (task,) = [t for t in tasks if t["name"] == task_name]
    module = next(v for k, v in task.items() if k.startswith("ansible.builtin."))
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    return yaml.safe_load(env.from_string(module[key]).render(context))


def test_the_md_array_is_created_as_raid0_of_the_probed_disks():
    s = settings(devices=TWO, raid_chunk="256K")
    argv = render_task_value(
        "md.yml",
        "Create the RAID 0 array",
        "argv",
        {
            "__dataset_staging": s,
            "__dataset_staging_disk": {"target": "/dev/md/data"},
            "__dataset_staging_probe": probe(disk("a"), disk("b")),
        },
    )
    assert argv == [
        "mdadm", "--create", "/dev/md/data", "--run", "--metadata=1.2", "--level=0",
        "--chunk=256", "--name=data", "--raid-devices=2", "/dev/loop0", "/dev/loop1",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("os_file", "conf", "initramfs"),
    [
        ("Debian.yml", "/etc/mdadm/mdadm.conf", ["update-initramfs", "-u"]),
        ("RedHat.yml", "/etc/mdadm.conf", ["dracut", "--force"]),
    ],
)
def test_the_array_is_persisted_where_each_os_family_reads_it(os_file, conf, initramfs):
    os_vars = yaml.safe_load((ROLE / "vars" / os_file).read_text())
    assert os_vars["__dataset_staging_mdadm_conf"] == conf
    assert os_vars["__dataset_staging_initramfs_command"] == initramfs
    assert os_vars["__dataset_staging_packages"]["md"] == ["mdadm"]
    assert os_vars["__dataset_staging_packages"]["xfs"] == ["xfsprogs"]


def test_ubuntu_and_debian_share_the_debian_vars_and_every_family_has_each_file_system():
    names = sorted(p.name for p in (ROLE / "vars").glob("*.yml"))
    assert names == ["Debian.yml", "RedHat.yml", "main.yml"]
    for os_file in ("Debian.yml", "RedHat.yml"):
        packages = yaml.safe_load((ROLE / "vars" / os_file).read_text())[
            "__dataset_staging_packages"
        ]
        assert set(packages) >= {"xfs", "ext4", "btrfs", "md", "tools"}


# ---------------------------------------------------------------- the probe on real loop devices


@contextlib.contextmanager
def loop_device(tmp_path: Path, size: int = 64 * 2**20):
    image = tmp_path / f"disk-{uuid.uuid4().hex[:6]}.img"
    with open(image, "wb") as handle:
        handle.truncate(size)
    done = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"no loop device here: {done.stderr.strip()}")
    device = done.stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", device], check=False)


class Module:
    """What the probe needs of AnsibleModule: run_command, and failing loudly."""

    def run_command(self, argv):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    def fail_json(self, msg):
        raise AssertionError(msg)


def test_probe_sees_a_blank_disk_a_file_system_and_an_md_member(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    with (
        loop_device(tmp_path) as blank,
        loop_device(tmp_path) as ext4,
        loop_device(tmp_path) as member,
    ):
        subprocess.run(["mkfs.ext4", "-q", "-L", "scratch", ext4], check=True)
        write_md_superblock(member, "oldhost:7")
        module = Module()
        facts = {d: probe_module.describe(module, d, [], set()) for d in (blank, ext4, member)}
    assert facts[blank]["signatures"] == []
    assert facts[blank]["size"] == 64 * 2**20
    (fs,) = facts[ext4]["signatures"]
    assert (fs["type"], fs["label"], fs["usage"]) == ("ext4", "scratch", "filesystem")
    (raid,) = facts[member]["signatures"]
    assert (raid["type"], raid["label"]) == ("linux_raid_member", "oldhost:7")
    plan = dataset_staging_disk_plan(
        probe({**facts[member], "path": member}), settings(devices=[member])
    )
    assert "holds an md RAID member signature (array oldhost:7)" in plan["refusals"][0]


def test_probe_sees_where_a_disk_is_mounted(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("loop devices and mounts need root")
    with loop_device(tmp_path) as device:
        subprocess.run(["mkfs.ext4", "-q", device], check=True)
        target = tmp_path / "mnt"
        target.mkdir()
        subprocess.run(["mount", device, str(target)], check=True)
        try:
            facts = probe_module.describe(Module(), device, probe_module._mountinfo(), set())
        finally:
            subprocess.run(["umount", str(target)], check=True)
    assert facts["mounts"] == [str(target)]


def test_patterns_leave_out_partition_links_and_name_what_matched_nothing(tmp_path):
    folder = tmp_path / "by-id"
    folder.mkdir()
    for name in ("nvme-a", "nvme-a-part1", "nvme-b"):
        (folder / name).write_text("")
    os.symlink(folder / "nvme-a", folder / "nvme-eui.a")  # two names of one disk
    found, unmatched = probe_module.expand(
        [f"{folder}/nvme-*", f"{folder}/sata-*", f"{folder}/nvme-b"]
    )
    assert found == [f"{folder}/nvme-a", f"{folder}/nvme-b"]
    assert unmatched == [f"{folder}/sata-*"]


def test_fstab_line_of_the_mount_point(tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text(
        "# /data was on sdb once\nUUID=abc / ext4 defaults 0 1\n"
        "UUID=1111 /data/ xfs noatime,nofail 0 0\n"
    )
    assert probe_module.fstab_line(str(fstab), "/data") == {
        "src": "UUID=1111",
        "fstype": "xfs",
        "opts": "noatime,nofail",
    }
    assert probe_module.fstab_line(str(fstab), "/scratch") == {}
    assert json.dumps(probe_module.fstab_line(str(tmp_path / "missing"), "/data")) == "{}"
