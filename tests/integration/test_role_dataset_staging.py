"""The dataset_staging role on a sandbox host with three loop-device disks: blank disks are
formatted, mounted by UUID and staged; disks holding data, mounted or in an array are refused
and left intact; copies survive SIGKILL, corruption and changed sources; bad input stops the
play before any change."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import time

import pytest

from tests.integration.ansible import ANSIBLE_BIN, CHECKOUT, run_playbook
from tests.integration.cases import cases_of, refusal, run_cases
from tests.support.dataset_staging import write_md_superblock
from tests.support.os_vars import LOAD_OS_VARS_TASK, READ_FACTS_TASK

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/dataset_staging/*",
    "plugins/*/dataset_*",
    "plugins/module_utils/dataset_*",
    "plugins/module_utils/sizes.py",
    "plugins/module_utils/mountinfo.py",
    "playbooks/stage_dataset.yml",
    "plugins/modules/package_manager_ready.py",
    "plugins/modules/os_packages_missing.py",
    "plugins/module_utils/dpkg_status.py",
    "tests/support/dataset_staging.py",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "playbooks/stage_dataset.yml"
VERIFY_PLAYBOOK = "playbooks/verify.yml"
VERIFY = "Verify the staging file system and the staged datasets (changes nothing)"
MiB = 2**20
MAKE_DATASET = """
import os, random, sys
root, count, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
for index in range(count):
    path = os.path.join(root, f"part{index % 3}", f"sample{index:04d}.bin")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(rng.randbytes(rng.randint(size // 2, size)))
"""


# The module runs inside a python fed over SSH (pipelining): found by its open temporary file.
KILL_THE_COPY = (
    "for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null | grep -q '[.]staging-' "
    "&& kill -KILL ${p#/proc/}; done"
)


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("staging", hosts=1, disks_per_host=3)


@pytest.fixture(scope="module")
def host(fleet):
    (only,) = fleet.hosts()
    return only


def sh(fleet, host, command: str) -> str:
    done = fleet.ssh(host, command, timeout=600)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout


def make_dataset(fleet, host, root: str, count: int, size: int, seed: int = 1) -> None:
    sh(fleet, host, f"python3 -c {shlex.quote(MAKE_DATASET)} {root} {count} {size} {seed}")


def checksums(fleet, host, folder: str) -> dict[str, str]:
    """sha256 of every regular file under a folder, temporaries included, by relative path."""
    out = sh(fleet, host, f"cd {folder} && find . -type f -print0 | sort -z | xargs -0r sha256sum")
    return {line[66:].removeprefix("./"): line[:64] for line in out.splitlines()}


def stage(fleet, devices, datasets, **variables):
    extra = {"dataset_staging_devices": devices, "dataset_staging_datasets": datasets, **variables}
    return run_playbook(fleet, PLAYBOOK, extra_vars=extra)


def task_result(run, host, name: str) -> dict:
    """The last result of a role task by its name (the json callback prefixes the role's)."""
    found = {}
    for play in run.output.get("plays", []):
        for task in play["tasks"]:
            if task["task"]["name"].split(" : ", 1)[-1] == name and host.name in task["hosts"]:
                found = task["hosts"][host.name]
    return found


def result_of(run, host, dataset: str) -> dict:
    """The result of the task that staged a dataset (the copy, or the commit of a push)."""
    for name in ("Copy from the node's source", "Verify and move the pushed files into place"):
        found = task_result(run, host, f"{name}: {dataset}")
        if found and not found.get("skipped"):
            return found
    raise AssertionError(f"no staging result for {dataset}")


def signatures(fleet, host, device: str) -> list[dict]:
    out = sh(fleet, host, f"wipefs --no-act --json {device}")
    return json.loads(out)["signatures"] if out.strip() else []


# ---------------------------------------------------------------- one blank disk


@pytest.fixture(scope="module")
def staged(fleet, host):
    """disk0 formatted and mounted at /data with a small dataset staged: the first run."""
    make_dataset(fleet, host, "/srv/small", count=30, size=256 * 1024)
    datasets = [{"name": "small", "source": "/srv/small"}]
    run = stage(fleet, host.disk_paths[:1], datasets)
    assert run.returncode == 0, run.failure_text(host.name)
    return run, datasets


def test_a_blank_disk_is_formatted_mounted_by_uuid_and_staged(fleet, host, staged):
    run, _ = staged
    live = json.loads(sh(fleet, host, "findmnt --json -o SOURCE,FSTYPE,OPTIONS,UUID /data"))[
        "filesystems"
    ][0]
    assert live["fstype"] == "xfs"
    assert "noatime" in live["options"].split(",")
    fstab = sh(fleet, host, "findmnt --fstab -n -o SOURCE,FSTYPE,OPTIONS --target /data").split()
    assert fstab == [f"UUID={live['uuid']}", "xfs", "noatime,nofail"]
    assert checksums(fleet, host, "/data/small") == checksums(fleet, host, "/srv/small")
    sh(
        fleet,
        host,
        "cd /data/small && sha256sum --check --quiet /data/.dataset-staging/small.sha256",
    )
    result = result_of(run, host, "small")
    assert result["files_copied"] == 30
    assert result["files_total"] == 30
    sizes = sh(fleet, host, "find /srv/small -type f -printf '%s\\n'").split()
    assert result["bytes_copied"] == sum(int(size) for size in sizes)
    summary = task_result(run, host, "Report what was staged")["msg"]
    assert any(line.startswith("small: 30 files") for line in summary), summary


def test_a_second_run_changes_nothing(fleet, host, staged):
    _, datasets = staged
    again = stage(fleet, host.disk_paths[:1], datasets)
    assert again.returncode == 0, again.failure_text(host.name)
    assert again.changed(host.name) == 0
    result = result_of(again, host, "small")
    assert (result["files_copied"], result["files_skipped"]) == (0, 30)


def test_verify_notices_a_missing_file_and_a_remount(fleet, host, staged):
    """playbooks/verify.yml (one task) checks the mount by UUID with its options and each
    dataset against the manifest staging recorded."""
    _, datasets = staged
    extra = {"dataset_staging_devices": host.disk_paths[:1], "dataset_staging_datasets": datasets}
    verified = run_playbook(fleet, VERIFY_PLAYBOOK, extra_vars=extra, tags="dataset_staging")
    assert verified.returncode == 0, verified.failure_text(host.name)
    said = task_result(verified, host, VERIFY)["msg"]
    assert said.startswith("/data: xfs mounted by UUID ") and said.endswith(
        ", as fstab says; /data/small: 30 files complete"
    )
    sh(
        fleet,
        host,
        "rm /data/small/part0/sample0000.bin "
        "&& sed -i '\\| /data |s|noatime,nofail|defaults|' /etc/fstab",
    )
    try:
        drifted = run_playbook(fleet, VERIFY_PLAYBOOK, extra_vars=extra, tags="dataset_staging")
        assert drifted.returncode != 0
        message = task_result(drifted, host, VERIFY)["msg"]
        assert message.startswith(
            "dataset_staging_mount: /data should hold a xfs file system mounted with "
            "noatime,nofail and listed in fstab by UUID; mounted: "
        )
        assert '; fstab: {"source": "UUID=' in message and '"options": "defaults"' in message
        assert message.endswith(
            " | /data/small: manifest entry part0/sample0000.bin: source file "
            "/data/small/part0/sample0000.bin no such file or directory"
        )
    finally:
        restaged = stage(fleet, host.disk_paths[:1], datasets)
    assert restaged.returncode == 0, restaged.failure_text(host.name)
    assert result_of(restaged, host, "small")["files_copied"] == 1
    fstab = sh(fleet, host, "findmnt --fstab -n -o OPTIONS --target /data").split()
    assert fstab == ["noatime,nofail"]


def test_nothing_to_stage_costs_one_skipped_task_and_verify_reads_nothing(fleet, host):
    run = run_playbook(
        fleet, PLAYBOOK, extra_vars={"dataset_staging_devices": [], "dataset_staging_datasets": []}
    )
    assert run.returncode == 0, run.failure_text(host.name)
    assert run.changed(host.name) == 0
    ran = [
        (task["task"]["name"].split(" : ", 1)[-1], task["hosts"][host.name])
        for play in run.output["plays"]
        for task in play["tasks"]
        if host.name in task["hosts"]
        and " : " in task["task"]["name"]
        and "Validating arguments against arg spec" not in task["task"]["name"]
    ]
    assert [name for name, _ in ran] == [
        # the play gathers no facts: the role reads the distribution, then its OS's vars file
        READ_FACTS_TASK,
        LOAD_OS_VARS_TASK,
        "Validate the variables",
        "Make the staging file system and stage the datasets",
        VERIFY,
    ]
    assert not ran[0][1].get("skipped") and not ran[1][1].get("skipped")
    assert ran[2][1]["msg"] == (
        "dataset_staging_devices and dataset_staging_datasets are empty: nothing to do"
    )
    assert ran[3][1]["skipped"] is True
    assert ran[4][1]["msg"] == "dataset_staging: no disk and no dataset given, nothing to verify"


def test_a_corrupted_file_at_the_destination_is_recopied(fleet, host, staged):
    _, datasets = staged
    victim = "part1/sample0004.bin"
    before = checksums(fleet, host, "/srv/small")[victim]
    sh(
        fleet,
        host,
        f"printf 'XXXX' | dd of=/data/small/{victim} bs=1 seek=100 conv=notrunc status=none",
    )
    assert checksums(fleet, host, "/data/small")[victim] != before
    run = stage(fleet, host.disk_paths[:1], datasets)
    assert run.returncode == 0, run.failure_text(host.name)
    result = result_of(run, host, "small")
    assert result["recopied_corrupt"] == [victim]
    assert result["files_copied"] == 1
    assert checksums(fleet, host, "/data/small")[victim] == before


def test_silent_corruption_is_found_when_every_file_is_verified(fleet, host, staged):
    _, datasets = staged
    victim = "part2/sample0005.bin"
    sh(
        fleet,
        host,
        f"f=/data/small/{victim}; t=$(stat -c %y $f); "
        f"printf 'Y' | dd of=$f bs=1 seek=7 conv=notrunc status=none; touch -d \"$t\" $f",
    )
    trusting = stage(fleet, host.disk_paths[:1], datasets)
    assert result_of(trusting, host, "small")["files_copied"] == 0  # size and mtime look unchanged
    thorough = stage(fleet, host.disk_paths[:1], datasets, dataset_staging_verify="all")
    assert thorough.returncode == 0, thorough.failure_text(host.name)
    result = result_of(thorough, host, "small")
    assert result["recopied_corrupt"] == [victim]
    assert result["files_verified"] >= 30
    assert checksums(fleet, host, "/data/small") == checksums(fleet, host, "/srv/small")


def test_a_source_file_changed_between_runs_is_recopied(fleet, host, staged):
    _, datasets = staged
    changed = "part0/sample0003.bin"
    sh(fleet, host, f"echo appended >> /srv/small/{changed}")
    run = stage(fleet, host.disk_paths[:1], datasets)
    assert run.returncode == 0, run.failure_text(host.name)
    result = result_of(run, host, "small")
    assert (result["files_copied"], result["changed_at_source"]) == (1, 1)
    assert checksums(fleet, host, "/data/small") == checksums(fleet, host, "/srv/small")


def test_a_copy_killed_midway_ends_complete_and_verified_on_the_next_run(fleet, host, staged):
    _, datasets = staged
    make_dataset(fleet, host, "/srv/big", count=48, size=16 * MiB, seed=2)
    big = [*datasets, {"name": "big", "source": "/srv/big"}]
    extra = {
        "dataset_staging_devices": host.disk_paths[:1],
        "dataset_staging_datasets": big,
        "dataset_staging_parallel": 2,
    }
    argv = [
        str(ANSIBLE_BIN / "ansible-playbook"),
        "-i",
        str(fleet.inventory),
        PLAYBOOK,
        "-e",
        json.dumps(extra),
    ]
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg"),
        "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
    }
    playbook = subprocess.Popen(
        argv, cwd=CHECKOUT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline, killed = time.monotonic() + 300, False
        while time.monotonic() < deadline and playbook.poll() is None:
            found = fleet.ssh(
                host, "find /data/big -name '.*.staging-*' 2>/dev/null | head -1"
            ).stdout.strip()
            if found and fleet.ssh(
                host, "ls /data/big/part*/ 2>/dev/null | grep -c '^sample'"
            ).stdout.strip() not in ("", "0"):
                fleet.ssh(host, KILL_THE_COPY)
                killed = True
                break
            time.sleep(0.2)
        assert killed, "the copy ended before it could be killed midway"
        assert playbook.wait(timeout=120) != 0
    finally:
        if playbook.poll() is None:
            playbook.kill()
    left = sh(fleet, host, "find /data/big -name '.*.staging-*' | wc -l")
    complete_before = len([p for p in checksums(fleet, host, "/data/big") if "staging-" not in p])
    assert 0 < complete_before < 48

    rerun = stage(fleet, host.disk_paths[:1], big, dataset_staging_parallel=2)
    assert rerun.returncode == 0, rerun.failure_text(host.name)
    result = result_of(rerun, host, "big")
    assert result["temps_removed"] == int(left)
    assert result["files_copied"] == 48 - complete_before
    assert sh(fleet, host, "find /data/big -name '.*.staging-*' | wc -l").strip() == "0"
    assert checksums(fleet, host, "/data/big") == checksums(fleet, host, "/srv/big")
    sh(fleet, host, "cd /data/big && sha256sum --check --quiet /data/.dataset-staging/big.sha256")
    sh(fleet, host, "rm -rf /srv/big /data/big")


def test_not_enough_space_fails_before_copying_naming_both_sizes(fleet, host, staged):
    _, datasets = staged
    sh(
        fleet,
        host,
        "mkdir -p /srv/huge && truncate -s 6G /srv/huge/one.bin "
        "&& truncate -s 1G /srv/huge/two.bin",
    )
    free = int(sh(fleet, host, "df -B1 --output=avail /data | tail -1"))
    run = stage(fleet, host.disk_paths[:1], [*datasets, {"name": "huge", "source": "/srv/huge"}])
    assert run.returncode != 0
    message = run.failure_text(host.name)
    assert f"needs {7 * 2**30} bytes (7.0 GiB) on /data, only " in message
    assert "bytes" in message.split("only ")[1] and "free" in message
    assert abs(int(message.split("only ")[1].split()[0]) - free) < 64 * MiB
    assert sh(fleet, host, "ls -A /data/huge 2>/dev/null | wc -l").strip() == "0"
    sh(fleet, host, "rm -rf /srv/huge")


# ---------------------------------------------------------------- hot copies, controller sources


def test_a_hot_copy_lands_in_dev_shm_verified(fleet, host, staged):
    run = stage(
        fleet, host.disk_paths[:1], [{"name": "small", "source": "/srv/small", "hot": True}]
    )
    assert run.returncode == 0, run.failure_text(host.name)
    assert checksums(fleet, host, "/dev/shm/datasets/small") == checksums(
        fleet, host, "/data/small"
    )
    again = stage(
        fleet, host.disk_paths[:1], [{"name": "small", "source": "/srv/small", "hot": True}]
    )
    assert again.changed(host.name) == 0
    sh(fleet, host, "rm -rf /dev/shm/datasets")


def test_a_dataset_on_the_controller_is_pushed_verified_and_resumes(fleet, host, staged, tmp_path):
    source = tmp_path / "ctrl"
    for index in range(12):
        path = source / f"d{index % 2}" / f"f{index}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(100_000 + index))
    datasets = [{"name": "ctrl", "source": str(source), "from": "controller"}]
    run = stage(fleet, host.disk_paths[:1], datasets)
    assert run.returncode == 0, run.failure_text(host.name)
    wanted = {
        str(p.relative_to(source)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in source.rglob("*.bin")
    }
    assert checksums(fleet, host, "/data/ctrl") == wanted
    assert (
        sh(fleet, host, "find /data/.dataset-staging/incoming/ctrl -type f | wc -l").strip() == "0"
    )
    (source / "d0" / "f0.bin").write_bytes(b"changed on the controller")
    sh(fleet, host, "rm /data/ctrl/d1/f1.bin")
    again = stage(fleet, host.disk_paths[:1], datasets)
    assert again.returncode == 0, again.failure_text(host.name)
    assert result_of(again, host, "ctrl")["files_copied"] == 2
    wanted["d0/f0.bin"] = hashlib.sha256(b"changed on the controller").hexdigest()
    assert checksums(fleet, host, "/data/ctrl") == wanted
    third = stage(fleet, host.disk_paths[:1], datasets)
    assert third.changed(host.name) == 0


# ---------------------------------------------------------------- disks that are not blank


def refused(fleet, host, device: str, found: str, **variables):
    run = stage(fleet, [device], [], dataset_staging_mount="/scratch", **variables)
    assert run.returncode != 0
    assert run.changed(host.name) == 0
    message = run.failure_text(host.name)
    assert device in message and found in message, message
    return message


def test_a_disk_holding_a_file_system_with_files_is_refused_and_left_intact(fleet, host):
    device = host.disk_paths[1]
    sh(fleet, host, f"mkfs.ext4 -q -L keep {device} && mkdir -p /mnt/k && mount {device} /mnt/k")
    sh(
        fleet,
        host,
        "head -c 1000000 /dev/urandom > /mnt/k/precious "
        "&& sha256sum /mnt/k/precious > /root/precious.sum && umount /mnt/k",
    )
    try:
        message = refused(fleet, host, device, "holds a ext4 signature (label keep")
        assert "not formatting it" in message
        assert "UUID=" not in sh(fleet, host, "cat /etc/fstab | grep scratch || true")
        sh(fleet, host, f"mount {device} /mnt/k")
        message = refused(
            fleet, host, device, "is mounted at /mnt/k", dataset_staging_force_format=True
        )
        assert "not touching it" in message
        sh(fleet, host, "sha256sum --check --quiet /root/precious.sum && umount /mnt/k")
        sh(
            fleet,
            host,
            f"mount -o ro {device} /mnt/k && sha256sum --check --quiet /root/precious.sum",
        )
    finally:
        fleet.ssh(host, "umount /mnt/k")
        fleet.ssh(host, f"wipefs --all --quiet {device}")


def test_an_md_array_member_is_refused(fleet, host):
    device = host.disk_paths[1]
    real = sh(fleet, host, f"realpath {device}").strip()
    # the few superblock fields mdadm writes first, on this machine's view of the same loop device
    write_md_superblock(real, "otherhost:7")
    try:
        assert [s["type"] for s in signatures(fleet, host, device)] == ["linux_raid_member"]
        refused(fleet, host, device, "holds an md RAID member signature (array otherhost:7)")
        assert [s["type"] for s in signatures(fleet, host, device)] == ["linux_raid_member"]
    finally:
        sh(fleet, host, f"wipefs --all --quiet {device}")


def test_force_format_erases_an_unused_disk_that_holds_a_signature(fleet, host):
    device = host.disk_paths[1]
    sh(fleet, host, f"mkfs.ext4 -q -L old {device}")
    run = stage(
        fleet, [device], [], dataset_staging_mount="/scratch", dataset_staging_force_format=True
    )
    assert run.returncode == 0, run.failure_text(host.name)
    assert [(s["type"], s["label"]) for s in signatures(fleet, host, device)] == [("xfs", "data")]
    sh(fleet, host, "umount /scratch && sed -i '\\| /scratch |d' /etc/fstab")
    sh(fleet, host, f"wipefs --all --quiet {device}")


# ---------------------------------------------------------------- several disks


def test_two_blank_disks_become_one_btrfs_raid0_mounted_and_staged(fleet, host, staged):
    devices = host.disk_paths[1:3]
    run = stage(
        fleet,
        devices,
        [{"name": "small", "source": "/srv/small"}],
        dataset_staging_filesystem="btrfs",
        dataset_staging_mount="/striped",
    )
    assert run.returncode == 0, run.failure_text(host.name)
    usage = sh(fleet, host, "btrfs filesystem usage -b /striped")
    assert "Data,RAID0" in usage and "Metadata,RAID1" in usage
    shown = sh(fleet, host, "btrfs filesystem show /striped")
    assert shown.count("devid") == 2
    assert checksums(fleet, host, "/striped/small") == checksums(fleet, host, "/srv/small")
    fstab = sh(fleet, host, "findmnt --fstab -n -o SOURCE,OPTIONS --target /striped").split()
    assert fstab[0].startswith("UUID=")
    assert [o for o in fstab[1].split(",") if o.startswith("device=")] == [
        f"device={d}" for d in devices
    ]
    again = stage(
        fleet,
        devices,
        [{"name": "small", "source": "/srv/small"}],
        dataset_staging_filesystem="btrfs",
        dataset_staging_mount="/striped",
    )
    assert again.returncode == 0 and again.changed(host.name) == 0, again.failure_text(host.name)
    sh(fleet, host, "umount /striped && sed -i '\\| /striped |d' /etc/fstab")
    sh(fleet, host, f"wipefs --all --quiet {' '.join(devices)}")


def test_two_blank_disks_become_one_md_raid0_array(fleet, host):
    if fleet.ssh(host, "test -e /proc/mdstat").returncode != 0:
        pytest.skip(
            "this kernel has no md driver (no /proc/mdstat, no modules to load): the md RAID 0 "
            "commands and mdadm.conf are checked by rendering in "
            "tests/unit/plugins/plugin_utils/test_dataset_staging_rules.py"
        )
    devices = host.disk_paths[1:3]
    run = stage(
        fleet, devices, [{"name": "small", "source": "/srv/small"}], dataset_staging_mount="/md"
    )
    assert run.returncode == 0, run.failure_text(host.name)
    assert "raid0" in sh(fleet, host, "cat /proc/mdstat")
    assert "ARRAY /dev/md/data" in sh(fleet, host, "cat /etc/mdadm/mdadm.conf")
    assert checksums(fleet, host, "/md/small") == checksums(fleet, host, "/srv/small")


# ---------------------------------------------------------------- bad input


BAD_INPUT = [
    (
        {"dataset_staging_datasets": [{"name": "a", "source": "srv/small"}]},
        "dataset_staging_datasets[0].source: an absolute path",
    ),
    (
        {"dataset_staging_datasets": [{"name": "a", "source": "/srv/nowhere"}]},
        "dataset_staging_datasets[a]: ",
    ),
    ({"dataset_staging_filesystem": "zfs"}, "dataset_staging_filesystem"),
    (
        {
            "dataset_staging_datasets": [
                {"name": "a", "source": "/srv/small"},
                {"name": "a", "source": "/srv/small"},
            ]
        },
        "dataset_staging_datasets: the name 'a' is used twice",
    ),
    ({"dataset_staging_mount": "data"}, "dataset_staging_mount: an absolute path"),
    (
        {"dataset_staging_datasets": [{"name": "hot", "source": "/srv/sparse", "hot": True}]},
        "dataset_staging_datasets[hot].hot: the dataset is",
    ),
]


@pytest.fixture(scope="module")
def bad_input_run(fleet, host):
    """Every bad value in one run, a case each, beside a disk that must stay as it is
    (tests/integration/cases.py)."""
    sh(fleet, host, "mkdir -p /srv/sparse && truncate -s 100M /srv/sparse/big.bin")
    device = host.disk_paths[2]
    before = signatures(fleet, host, device)
    common = {"dataset_staging_devices": [device], "dataset_staging_mount": "/bad"}
    return device, before, run_cases(fleet, host, PLAYBOOK, cases_of(BAD_INPUT), common=common)


@pytest.mark.parametrize(("index", "named"), [(i, n) for i, (_, n) in enumerate(BAD_INPUT)])
def test_bad_input_fails_before_any_change_naming_the_variable(
    fleet, host, bad_input_run, index, named
):
    device, before, run = bad_input_run
    assert named in refusal(run, index)
    assert signatures(fleet, host, device) == before
    assert fleet.ssh(host, "test -e /bad").returncode != 0


def test_check_mode_on_a_blank_disk_changes_nothing(fleet, host):
    device = host.disk_paths[2]
    sh(fleet, host, f"wipefs --all --quiet {device}")
    run = run_playbook(
        fleet,
        PLAYBOOK,
        extra_vars={
            "dataset_staging_devices": [device],
            "dataset_staging_mount": "/checked",
            "dataset_staging_datasets": [{"name": "small", "source": "/srv/small"}],
        },
        check=True,
    )
    assert run.returncode == 0, run.failure_text(host.name)
    assert signatures(fleet, host, device) == []
    assert fleet.ssh(host, "test -e /checked").returncode != 0
    assert "/checked" not in sh(fleet, host, "cat /etc/fstab")
