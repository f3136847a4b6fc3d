"""plugins/modules/free_space_ready.py: the file systems of real paths read with statvfs (tmp
folders, and as root a small tmpfs filled to the last byte or the last inode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import free_space_ready as module

from tests import collection_link

MiB = 2**20
COLLECTIONS = collection_link.ensure().parents[2]


@pytest.fixture
def small_tmpfs(tmp_path):
    """Mount tmpfs file systems of our own under tmp_path (root only); unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "test", str(point)], check=True)
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], check=True)


def test_paths_on_one_file_system_are_read_once_with_what_statvfs_says(tmp_path):
    (tmp_path / "etc").mkdir()
    paths = [
        {"path": str(tmp_path / "etc"), "what": "configuration"},
        {"path": str(tmp_path / "opt/venvs/train"), "what": "the training venv"},
    ]
    (found,) = module.file_systems(paths, min_free=0, mount_points=["/", str(tmp_path)])
    stats = os.statvfs(tmp_path)
    assert found["mount_point"] == str(tmp_path)
    assert found["paths"] == [p["path"] for p in paths]
    assert found["what"] == ["configuration", "the training venv"]
    # other tests write beside us: the free space is the same within a few MiB
    assert abs(found["free"] - stats.f_bavail * stats.f_frsize) < 64 * MiB
    assert found["short"] is False
    (huge,) = module.file_systems(paths, min_free=2**62, mount_points=["/"])
    assert huge["mount_point"] == "/" and huge["short"] is True


def test_a_path_given_twice_is_named_once(tmp_path):
    venv = str(tmp_path / "opt/venvs/train")
    paths = [
        {"path": venv, "what": "the training venv"},
        {"path": venv, "what": "hostcheck's venv"},
    ]
    (found,) = module.file_systems(paths, min_free=0, mount_points=["/"])
    assert (found["paths"], found["what"]) == ([venv], ["the training venv"])


def test_a_path_not_made_yet_is_judged_by_the_nearest_folder_that_exists(tmp_path):
    assert module.nearest_existing(str(tmp_path / "a/b/c")) == str(tmp_path.resolve())
    assert module.mount_point("/etc/security", ["/", "/et", "/etc"]) == "/etc"
    assert module.mount_point("/etcetera", ["/", "/etc"]) == "/"


def test_a_full_tmpfs_is_short_and_the_line_names_it(small_tmpfs):
    point = small_tmpfs("root", "size=1m")
    paths = [{"path": str(point / "etc/fstab"), "what": "configuration"}]
    (empty,) = module.file_systems(paths, min_free=MiB, mount_points=["/", str(point)])
    assert (empty["free"], empty["short"]) == (MiB, False)

    (point / "fill").write_bytes(b"\0" * (MiB - 4096))  # leaves one page
    (almost,) = module.file_systems(paths, min_free=MiB, mount_points=["/", str(point)])
    assert (almost["free"], almost["short"]) == (4096, True)
    assert module.refusal(almost, MiB, "provision_min_free_space") == (
        f"the file system at {point} is full: it has 4.0 KiB free, and the roles need at least "
        f"1.0 MiB there to write configuration ({point}/etc/fstab): free space there "
        f"(df -h {point}) and run again (or lower provision_min_free_space)"
    )


def test_no_free_inode_is_short_whatever_the_space(small_tmpfs):
    point = small_tmpfs("inodes", "size=1m,nr_inodes=2")  # the root folder takes one
    (point / "only").touch()
    paths = [{"path": str(point), "what": "configuration"}]
    (full,) = module.file_systems(paths, min_free=0, mount_points=[str(point)])
    assert (full["free_inodes"], full["short"]) == (0, True)
    assert full["free"] > 0
    assert "it has no free inodes, and the roles need at least one free inode there" in (
        module.refusal(full, 0, "provision_min_free_space")
    )


def test_a_relative_path_is_refused_naming_the_variable_that_gave_it(tmp_path):
    """As Ansible runs the module: its file with the arguments, JSON on stdout."""
    args = {
        "paths": [
            {"path": "/etc", "what": "configuration"},
            {"path": "venvs/train", "what": "pillow-simd's venv", "set_by": "pillow_simd_venv"},
        ],
        "min_free": "1MiB",
    }
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    done = subprocess.run(
        [sys.executable, module.__file__, str(tmp_path / "args.json")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(COLLECTIONS)},
    )
    result = json.loads(done.stdout)
    assert result["failed"] is True
    assert result["msg"] == "pillow_simd_venv: venvs/train is not an absolute path"
