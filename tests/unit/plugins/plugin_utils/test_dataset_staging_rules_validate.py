"""The dataset_staging role's validate action: each bad variable named, disks with data refused,
unreadable sources and hot copies too large for their tmpfs refused, and the values main.yml and
verify.yml use. The runs through ansible-playbook use this machine as the node (and as the
controller), with no disk given or only patterns that match none."""

from __future__ import annotations

import hashlib

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    measure_args,
    measure_here,
    parse_hot_fs,
    refuse,
    too_large,
    unreadable,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.support.dataset_staging import settings, write_dataset
from tests.support.role_arguments import checked, spec_refusal


def dataset(name: str, hot: bool = False, side: str = "node") -> dict:
    return {
        "name": name,
        "variable": f"dataset_staging_datasets[{name}]",
        "source": f"/srv/{name}",
        "side": side,
        "manifest": None,
        "hot": hot,
    }


# ---------------------------------------------------------------- the variables


@pytest.mark.parametrize(
    ("parallel", "got"), [(0, "0"), (65, "65"), ("four", "'four'"), (True, "True")]
)
def test_parallel_is_checked_against_its_range(parallel, got):
    with pytest.raises(AnsibleFilterError) as raised:
        settings(parallel=parallel)
    assert str(raised.value) == (
        f"dataset_staging_parallel: a whole number of files copied at once from 1 to 64, got {got}"
    )


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"mount": "data"}, "dataset_staging_mount: an absolute path; got 'data'"),
        ({"devices": ["sdb"]}, "dataset_staging_devices[0]: a path under /dev"),
        ({"label": "much-too-long-for-xfs"}, "dataset_staging_label: 1 to 12 characters for xfs"),
        ({"raid_chunk": "3K"}, "dataset_staging_raid_chunk: a power of two"),
        ({"hot_root": "/data/hot"}, "dataset_staging_hot_root: a folder apart"),
        (
            {"datasets": [{"name": "a", "source": "/x"}, {"name": "a", "source": "/y"}]},
            "dataset_staging_datasets: the name 'a' is used twice",
        ),
    ],
)
def test_the_variables_are_checked_together_naming_the_variable(changes, named):
    with pytest.raises(Invalid, match=r"^dataset_staging_") as raised:
        settings(**changes)
    assert named in str(raised.value)


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        (
            {"dataset_staging_filesystem": "zfs"},
            "value of dataset_staging_filesystem must be one of: xfs, ext4, btrfs, got: zfs",
        ),
        (
            {"dataset_staging_checksum": "crc32"},
            "value of dataset_staging_checksum must be one of: sha256, sha512, sha1, md5, "
            "blake2b, got: crc32",
        ),
        (
            {"dataset_staging_verify": "some"},
            "value of dataset_staging_verify must be one of: changed, all, got: some",
        ),
        (
            {"dataset_staging_force_format": "maybe"},
            "argument 'dataset_staging_force_format' is of type str and we were unable to "
            "convert to bool",
        ),
        (
            {"dataset_staging_verify_written": "maybe"},
            "argument 'dataset_staging_verify_written' is of type str and we were unable to "
            "convert to bool",
        ),
        (
            {"dataset_staging_datasets": "imagenet"},
            "Elements value for option 'dataset_staging_datasets' is of type str and we were "
            "unable to convert to dict",
        ),
        (
            {"dataset_staging_datasets": [{"name": "a", "source": "/x", "from": "s3"}]},
            "value of from must be one of: node, controller, got: s3 found in "
            "dataset_staging_datasets",
        ),
        (
            {"dataset_staging_datasets": [{"name": "a", "source": "/x", "hot": "maybe"}]},
            "argument 'hot' is of type str found in 'dataset_staging_datasets'. and we were "
            "unable to convert to bool",
        ),
        (
            {"dataset_staging_datasets": [{"name": "a", "source": "/x", "size": 3}]},
            "dataset_staging_datasets.size. Supported parameters include: from, hot, manifest, "
            "name, source.",
        ),
        (
            {"dataset_staging_datasets": [{"name": "a"}]},
            "missing required arguments: source found in dataset_staging_datasets",
        ),
    ],
)
def test_a_choice_type_or_key_the_spec_refuses_is_named_before_the_checks(changes, refused):
    assert refused in spec_refusal("dataset_staging", changes)


def test_what_the_spec_converts_reaches_the_checks_converted():
    given = checked(
        "dataset_staging",
        {
            "dataset_staging_devices": "/dev/disk/by-id/nvme-a",
            "dataset_staging_force_format": "yes",
            "dataset_staging_datasets": [{"name": "a", "source": "/x", "hot": "no"}],
        },
    )
    assert given["dataset_staging_devices"] == ["/dev/disk/by-id/nvme-a"]
    assert given["dataset_staging_force_format"] is True
    assert given["dataset_staging_datasets"] == [
        {"name": "a", "source": "/x", "from": "node", "manifest": None, "hot": False}
    ]


def test_btrfs_is_refused_on_the_rhel_family_only():
    with pytest.raises(Invalid, match=r"^dataset_staging_filesystem: btrfs is not"):
        settings("RedHat", filesystem="btrfs")
    assert settings("Debian", filesystem="btrfs")["filesystem"] == "btrfs"


# ---------------------------------------------------------------- refusals


def test_refusals_become_one_line():
    refuse([])
    with pytest.raises(Invalid) as raised:
        refuse(["dataset_staging_devices: /dev/x matches no device", "dataset_staging_mount: m"])
    assert str(raised.value) == (
        "dataset_staging_devices: /dev/x matches no device | dataset_staging_mount: m"
    )


def test_unreadable_datasets_are_named_by_their_variable():
    measured = [
        {"bytes_total": 3, "__dataset_staging_item": dataset("fine")},
        {"failed": True, "msg": "source: /srv/gone does not exist",
         "__dataset_staging_item": dataset("gone")},
        {"failed": True, "__dataset_staging_item": dataset("mute", side="controller")},
    ]  # fmt: skip
    assert unreadable(measured) == [
        "dataset_staging_datasets[gone]: source: /srv/gone does not exist",
        "dataset_staging_datasets[mute]: could not be read",
    ]


def test_hot_copies_larger_than_their_file_system_are_named_with_both_sizes():
    hot_fs = parse_hot_fs("     67108864 /dev/shm\n")
    assert hot_fs == {"size": 64 * 2**20, "target": "/dev/shm"}
    measured = [
        {"bytes_total": 100 * 2**20, "__dataset_staging_item": dataset("big", hot=True)},
        {"bytes_total": 100 * 2**20, "__dataset_staging_item": dataset("cold")},
        {"bytes_total": 2**20, "__dataset_staging_item": dataset("small", hot=True)},
        {"bytes_total": 64 * 2**20, "__dataset_staging_item": dataset("exact", hot=True)},
    ]
    assert too_large(measured, hot_fs) == [
        "dataset_staging_datasets[big].hot: the dataset is 104857600 bytes (100.0 MiB), more "
        "than the 67108864 bytes (64.0 MiB) of /dev/shm (dataset_staging_hot_root)"
    ]


# ---------------------------------------------------------------- measuring on the controller


def test_measuring_here_gives_what_the_module_gives(tmp_path):
    files = write_dataset(tmp_path / "set")
    result = measure_here({"mode": "measure", "name": "set", "source": str(tmp_path / "set")})
    assert (result["files_total"], result["bytes_total"]) == (3, 3345)
    assert result["changed"] is False and "failed" not in result
    missing = measure_here({"mode": "measure", "name": "x", "source": str(tmp_path / "nowhere")})
    assert missing == {"failed": True, "msg": f"source: {tmp_path / 'nowhere'} does not exist"}
    # a manifest is read with the role's checksum, as the copy later reads it
    manifest = tmp_path / "set.sha512"
    manifest.write_text(
        "".join(f"{hashlib.sha512(data).hexdigest()}  {rel}\n" for rel, data in files.items())
    )
    entry = {**dataset("set"), "source": str(tmp_path / "set"), "manifest": str(manifest)}
    args = measure_args(entry, "sha512")
    assert args["checksum"] == "sha512"
    assert measure_here(args)["bytes_total"] == 3345
    wrong = measure_here(measure_args(entry, "sha256"))
    assert wrong["failed"] and "checksum has 128 hex digits, sha256 has 64" in wrong["msg"]
    assert "checksum" not in measure_args(dataset("plain"), "sha512")


# ---------------------------------------------------------------- the action, on this machine
