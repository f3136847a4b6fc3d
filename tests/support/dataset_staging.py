"""What the dataset_staging role's tests share: the validated settings from the role's defaults,
a small dataset on disk, and an md RAID member's superblock on a device."""

from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path

import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.dataset_staging_rules import (
    GIVEN,
    dataset_staging_settings,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import numbers_in_range

from tests.paths import CHECKOUT

ROLE = CHECKOUT / "roles" / "dataset_staging"
RANGES = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__dataset_staging_number_ranges"]


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def settings(os_family: str = "Debian", **changes) -> dict:
    """The role's settings from its defaults and `changes`, checked as its validation does:
    the numbers against their ranges (vars/main.yml), then all of them together."""
    given = {key: defaults()[f"dataset_staging_{key}"] for key in GIVEN}
    given.update(changes)
    numbers_in_range({"dataset_staging_parallel": given["parallel"]}, RANGES)
    return dataset_staging_settings(given, os_family)


def write_dataset(root: Path) -> dict[str, bytes]:
    files = {"a/one.bin": os.urandom(1000), "b/two.bin": os.urandom(2345), "three": b""}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def write_md_superblock(device: str, array_name: str) -> None:
    """The few fields of an md v1.2 superblock (4 KiB into the member) that blkid and wipefs
    recognise a RAID member by: what mdadm --create writes first."""
    block = bytearray(512)
    struct.pack_into("<II", block, 0, 0xA92B4EFC, 1)
    block[16:32] = uuid.uuid4().bytes
    block[32:64] = array_name.encode().ljust(32, b"\0")
    struct.pack_into("<Q", block, 144, 8)
    with open(device, "r+b") as handle:
        handle.seek(4096)
        handle.write(block)
