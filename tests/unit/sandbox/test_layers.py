"""Converged layers (tests/sandbox/layers.py): what the key is made of, what a kept layer holds,
and when one is found."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.sandbox import rootfs
from tests.sandbox.layers import Layers, layer_key

RECIPE = {"playbook": "site.yml", "extra_vars": {}, "tags": None, "hosts": ["node1"]}


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    (root / "roles/shm/tasks").mkdir(parents=True)
    (root / "roles/shm/tasks/main.yml").write_text("---\n- name: Size /dev/shm\n")
    (root / "site.yml").write_text("---\n")
    (root / "docs").mkdir()
    (root / "docs/index.md").write_text("# docs\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


def test_the_key_follows_the_content_of_what_a_converge_reads(checkout):
    first = layer_key(checkout, RECIPE)
    assert layer_key(checkout, RECIPE) == first
    (checkout / "docs/index.md").write_text("# other docs\n")
    assert layer_key(checkout, RECIPE) == first  # docs are no input
    (checkout / "roles/shm/tasks/main.yml").write_text("---\n- name: Size it otherwise\n")
    changed = layer_key(checkout, RECIPE)
    assert changed != first  # an uncommitted change to a role counts
    assert layer_key(checkout, {**RECIPE, "tags": "shm"}) != changed
    assert layer_key(checkout, {**RECIPE, "extra_vars": {"shm_size": "1G"}}) != changed
    assert layer_key(checkout, {**RECIPE, "os": ["rocky9"]}) != layer_key(
        checkout, {**RECIPE, "os": ["debian12"]}
    )


def upper_of(folder: Path) -> Path:
    files = {
        "etc/hostname": "node1\n",
        "etc/machine-id": "0123\n",
        "etc/ssh/ssh_host_ed25519_key": "private\n",
        "etc/ssh/ssh_host_ed25519_key.pub": "public\n",
        "root/.ssh/authorized_keys": "key\n",
        "var/log/journal/0123/system.journal": "log\n",
        "etc/fstab": "tmpfs /dev/shm tmpfs size=1G 0 0\n",
        "opt/venvs/train/bin/python": "#!\n",
    }
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.mknod(folder / "etc/removed-by-the-converge", 0o600 | 0o020000, os.makedev(0, 0))
    return folder


def test_a_kept_layer_holds_the_converge_less_what_is_the_hosts_own(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a whiteout (character device 0/0) needs root to make")
    store = Layers(tmp_path / "cache")
    upper = upper_of(tmp_path / "node1" / "upper")
    kept = store.keep("k1", {"node1": upper})
    layer = kept["node1"]
    assert not upper.exists()  # moved, not copied
    found = sorted(str(p.relative_to(layer)) for p in layer.rglob("*") if not p.is_dir())
    assert found == [
        "etc/fstab",
        "etc/removed-by-the-converge",  # the converge's whiteouts stay in force
        "opt/venvs/train/bin/python",
    ]
    assert store.find("k1", ["node1"]) == {"node1": layer}
    assert store.find("k1", ["node1", "node2"]) is None
    assert store.find("k2", ["node1"]) is None


def test_an_unfinished_layer_is_not_found(tmp_path):
    store = Layers(tmp_path / "cache")
    (store.folder("k1") / "node1").mkdir(parents=True)
    assert store.find("k1", ["node1"]) is None


@pytest.mark.parametrize(
    ("mountinfo", "used"),
    [
        (b"overlay rw,lowerdir=/c/rootfs/debian12-ab,upperdir=/u,workdir=/w\n", True),
        (b"overlay rw,lowerdir=/c/layers/k/node1:/c/rootfs/debian12-ab,upperdir=/u\n", True),
        (b"overlay rw,lowerdir=/c/rootfs/debian12-abc,upperdir=/u\n", False),
        (b"overlay rw,lowerdir=/c/layers/k/node1:/c/rootfs/debian12-abc,upperdir=/u\n", False),
    ],
)
def test_a_root_is_in_use_below_a_layer_too(mountinfo, used):
    assert bool(rootfs.lower_layer(Path("/c/rootfs/debian12-ab")).search(mountinfo)) is used
