"""The dataset_staging role's verify action on plain data: findmnt's view of the staging mount
and its fstab line against the settings, the copies it checks (each dataset and its hot copy),
and what a check-mode copy says about each; the messages are those operators look for."""

from __future__ import annotations

import json

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    copy_problem,
    dataset_copies,
    mount_problem,
    parse_mount_read,
)

from tests.support.dataset_staging import settings as checked

UUID = "0f6b4e1c-5d0a-4a53-9d7a-0c1f3b2e9a11"


def settings(**changes) -> dict:
    """The defaults on Debian, with one disk."""
    return checked(devices=["/dev/disk/by-id/nvme-a"], **changes)


def findmnt(live: dict | None, fstab: dict | None) -> str:
    """What the action's script prints: findmnt's JSON of both, null for none."""
    return json.dumps(
        {
            "live": {"filesystems": [live]} if live else None,
            "fstab": {"filesystems": [fstab]} if fstab else None,
        }
    )


LIVE = {
    "source": "/dev/nvme0n1",
    "target": "/data",
    "fstype": "xfs",
    "options": "rw,noatime,attr2,inode64",
    "uuid": UUID,
}
FSTAB = {"source": f"UUID={UUID}", "target": "/data", "fstype": "xfs", "options": "noatime,nofail"}


def test_the_staging_file_system_mounted_by_uuid_and_persisted_holds():
    mounted, persisted = parse_mount_read(findmnt(LIVE, FSTAB))
    assert mount_problem(settings(), mounted, persisted) is None


@pytest.mark.parametrize(
    ("live", "fstab", "shown"),
    [
        (None, FSTAB, 'mounted: {"fstype": "nothing mounted", "uuid": "", "options": ""}'),
        (LIVE, None, 'fstab: {"source": "no fstab line", "options": ""}'),
        ({**LIVE, "options": "rw,relatime"}, FSTAB, '"options": "rw,relatime"'),  # remounted
        (LIVE, {**FSTAB, "source": "/dev/nvme0n1"}, '"source": "/dev/nvme0n1"'),
        (LIVE, {**FSTAB, "options": "noatime"}, '"options": "noatime"'),
        ({**LIVE, "fstype": "ext4"}, FSTAB, '"fstype": "ext4"'),
    ],
)
def test_drift_of_the_mount_or_its_fstab_line_is_named(live, fstab, shown):
    problem = mount_problem(settings(), *parse_mount_read(findmnt(live, fstab)))
    assert problem.startswith(
        "dataset_staging_mount: /data should hold a xfs file system mounted with noatime,nofail "
        "and listed in fstab by UUID; mounted: "
    )
    assert shown in problem


def test_each_dataset_and_its_hot_copy_is_checked_against_the_recorded_manifest():
    staged = settings(
        datasets=[
            {"name": "small", "source": "/srv/small"},
            {"name": "hot", "source": "/srv/hot", "hot": True},
        ]
    )
    copies = dataset_copies(staged)
    assert [(c["name"], c["dest"], c["state_dir"]) for c in copies] == [
        ("small", "/data/small", "/data/.dataset-staging"),
        ("hot", "/data/hot", "/data/.dataset-staging"),
        ("hot", "/dev/shm/datasets/hot", staged["hot_state_dir"]),
    ]
    assert {c["source"] for c in copies[1:]} == {"/data/hot"}
    assert {c["manifest"] for c in copies[1:]} == {"/data/.dataset-staging/hot.sha256"}
    assert {(c["mode"], c["checksum"], c["verify"]) for c in copies} == {
        ("copy", "sha256", "changed")
    }
    assert dataset_copies(settings()) == []


def test_a_copy_that_would_copy_anything_or_fails_is_named():
    copy = dataset_copies(settings(datasets=[{"name": "small", "source": "/srv/small"}]))[0]
    complete = {"would_copy_files": 0, "files_total": 30, "summary": "small: would copy 0 files"}
    assert copy_problem(copy, complete) is None
    missing = {"would_copy_files": 1, "summary": "small: would copy 1 files 256.0 KiB, 29 in place"}
    assert copy_problem(copy, missing) == (
        "/data/small is not complete: small: would copy 1 files 256.0 KiB, 29 in place"
    )
    failed = {
        "failed": True,
        "msg": "small: the manifest /data/.dataset-staging/small.sha256 is missing",
    }
    assert copy_problem(copy, failed) == (
        "/data/small: small: the manifest /data/.dataset-staging/small.sha256 is missing"
    )
