"""Converged layers (tests/sandbox/layers.py): what the key is made of, what a kept layer holds,
and when one is found."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.sandbox import layers, rootfs
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


def kept_layer(store: Layers, tmp_path: Path, key: str, size: int, used_days_ago: float) -> Path:
    upper = tmp_path / key / "upper"
    upper.mkdir(parents=True)
    (upper / "blob").write_bytes(os.urandom(size))
    layer = store.keep(key, {"node1": upper})["node1"].parent
    stamp = layer.with_name(f".used-{key}")
    when = time.time() - used_days_ago * 86400
    os.utime(stamp, (when, when))
    return layer


def test_the_least_recently_used_layers_go_first_when_the_total_is_over_its_bound(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(layers, "KEEP_AT_MOST_BYTES", 3 * 2**20)
    running = set()
    monkeypatch.setattr(rootfs, "in_use", lambda folder: folder.name in running)
    store = Layers(tmp_path / "cache")
    oldest = kept_layer(store, tmp_path, "k1", 2**20, used_days_ago=3)
    older = kept_layer(store, tmp_path, "k2", 2**20, used_days_ago=2)
    assert json.loads((older / layers.DONE).read_text())["bytes"] >= 2**20
    running.add("k1")  # a host runs on the oldest: it stays, the next oldest goes
    newer = kept_layer(store, tmp_path, "k3", 2**20, used_days_ago=1)
    assert (oldest.exists(), older.exists(), newer.exists()) == (True, False, True)
    running.clear()
    newest = kept_layer(store, tmp_path, "k4", 2**20, used_days_ago=0)
    assert (oldest.exists(), newer.exists(), newest.exists()) == (False, True, True)
    assert not oldest.with_name(".used-k1").exists()
    assert store.find("k3", ["node1"]) == {"node1": newer / "node1"}


def test_layers_unused_for_a_week_go_even_under_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(rootfs, "in_use", lambda folder: False)
    store = Layers(tmp_path / "cache")
    stale = kept_layer(store, tmp_path, "k1", 4096, used_days_ago=layers.KEEP_UNUSED_DAYS + 1)
    recent = kept_layer(store, tmp_path, "k2", 4096, used_days_ago=layers.KEEP_UNUSED_DAYS - 1)
    kept_layer(store, tmp_path, "k3", 4096, used_days_ago=0)
    assert (stale.exists(), recent.exists()) == (False, True)


def test_a_layer_made_before_sizes_were_recorded_is_measured(tmp_path):
    folder = tmp_path / "layer"
    (folder / "node1").mkdir(parents=True)
    (folder / "node1" / "blob").write_bytes(b"x" * 100_000)
    os.link(folder / "node1" / "blob", folder / "node1" / "again")
    (folder / layers.DONE).write_text(json.dumps({"hosts": ["node1"]}))
    measured = layers._recorded_bytes(folder)
    assert 100_000 <= measured < 200_000  # the second link is not counted again
