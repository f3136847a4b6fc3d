"""The dataset_staging role's validate action through ansible-playbook, with this machine as the
node (and as the controller)."""

from __future__ import annotations

import os

import pytest

from tests.support.dataset_staging import write_dataset
from tests.support.role_validation import validate, validate_cases


def test_defaults_validate_once_and_touch_no_disk(tmp_path):
    first, again = validate("dataset_staging", {}, tmp_path)
    values = first["values"]
    assert values["settings"]["layout"] == "none"
    assert values["probe"]["skipped"] is True
    assert values["disk"] == {"action": "none", "target": None, "refusals": [], "wipe": []}
    assert values["measured"] == []
    assert values["os_vars"]["__dataset_staging_mdadm_conf"] in (
        "/etc/mdadm/mdadm.conf",
        "/etc/mdadm.conf",
    )
    assert (
        again["values"] == values
        and again["msg"] == "dataset_staging: validated earlier in this run"
    )


def test_sources_on_the_node_and_on_the_controller_are_measured(tmp_path):
    write_dataset(tmp_path / "node")
    write_dataset(tmp_path / "ctrl")
    datasets = [
        {"name": "ctrl", "source": str(tmp_path / "ctrl"), "from": "controller"},
        {"name": "node", "source": str(tmp_path / "node")},
    ]
    (first, _) = validate("dataset_staging", {"dataset_staging_datasets": datasets}, tmp_path)
    measured = first["values"]["measured"]
    assert [m["__dataset_staging_item"]["name"] for m in measured] == ["node", "ctrl"]
    assert [m["bytes_total"] for m in measured] == [3345, 3345]
    assert "hot_fs" not in first["values"]


def test_a_missing_source_is_refused_naming_the_dataset(tmp_path):
    datasets = [
        {"name": "a", "source": str(tmp_path / "nowhere")},
        {"name": "b", "source": str(tmp_path / "gone"), "from": "controller"},
    ]
    (failed,) = validate("dataset_staging", {"dataset_staging_datasets": datasets}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"] == (
        f"dataset_staging_datasets[a]: source: {tmp_path / 'nowhere'} does not exist | "
        f"dataset_staging_datasets[b]: source: {tmp_path / 'gone'} does not exist"
    )


def test_a_hot_copy_larger_than_its_tmpfs_is_refused(tmp_path):
    source = tmp_path / "huge"
    source.mkdir()
    shm = os.statvfs("/dev/shm")
    size = shm.f_blocks * shm.f_frsize + 2**20
    with open(source / "sparse.bin", "wb") as handle:
        handle.truncate(size)
    datasets = [{"name": "huge", "source": str(source), "hot": True}]
    (failed,) = validate("dataset_staging", {"dataset_staging_datasets": datasets}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"].startswith(
        f"dataset_staging_datasets[huge].hot: the dataset is {size} bytes ("
    )
    assert f"more than the {size - 2**20} bytes (" in failed["msg"]
    assert failed["msg"].endswith(" of /dev/shm (dataset_staging_hot_root)")


def test_a_small_hot_copy_passes_and_the_file_system_is_read(tmp_path):
    write_dataset(tmp_path / "small")
    datasets = [{"name": "small", "source": str(tmp_path / "small"), "hot": True}]
    (first, _) = validate("dataset_staging", {"dataset_staging_datasets": datasets}, tmp_path)
    assert first["values"]["hot_fs"]["target"] == "/dev/shm"
    assert first["values"]["hot_fs"]["size"] > 0


def test_devices_that_match_nothing_are_refused_by_the_probe(tmp_path):
    variables = {"dataset_staging_devices": ["/dev/disk/by-id/no-such-disk-*"]}
    (failed,) = validate("dataset_staging", variables, tmp_path)
    assert failed["failed"] is True
    assert (
        failed["msg"] == "dataset_staging_devices: /dev/disk/by-id/no-such-disk-* matches no device"
    )


BAD = [
    (
        {"dataset_staging_enabled": "sometimes"},
        "dataset_staging: validation of arguments failed: argument 'dataset_staging_enabled'",
    ),
    ({"dataset_staging_parallel": 0}, "dataset_staging_parallel: a whole number of files"),
    ({"dataset_staging_mount": "data"}, "dataset_staging_mount: an absolute path; got 'data'"),
]


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, list[dict]]:
    """BAD's values, each a host of one run."""
    cases = {name: variables for variables, _ in BAD for name in variables}
    return validate_cases("dataset_staging", cases, tmp_path_factory.mktemp("refused"))


@pytest.mark.parametrize(("variables", "message"), BAD)
def test_the_action_fails_naming_the_variable(refused, variables, message):
    (name,) = variables
    (failed,) = refused[name]
    assert failed["failed"] is True
    assert failed["msg"].startswith(message)


def test_switched_off_checks_nothing_else(tmp_path):
    variables = {"dataset_staging_enabled": False, "dataset_staging_mount": "data"}
    first, again = validate("dataset_staging", variables, tmp_path)
    assert first["values"] == {} == again["values"]
