"""The dataset_stage module of the dataset_staging role on real files: copies are complete and
verified, reruns copy nothing, corruption and source changes are found, killed runs leave
nothing that looks complete, and the free-space check stops a copy before it starts."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import dataset_copy
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_manifest import (
    parse_manifest,
    parse_sizes,
)
from hostcheck._shared.sizes import format_size

from tests import collection_link
from tests.paths import CHECKOUT as REPO

MODULE_PATH = REPO / "plugins" / "modules" / "dataset_stage.py"
# where ansible_collections.hostcheck.gpu_hosts, which the module imports, is found
COLLECTIONS = str(collection_link.ensure().parents[2])
SPEC = importlib.util.spec_from_file_location("dataset_stage", MODULE_PATH)
ds = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ds)

KIB = 1024
DATASET = {
    "train/part-000.bin": os.urandom(300 * KIB),
    "train/part-001.bin": os.urandom(200 * KIB + 7),
    "train/deep/er/part-002.bin": os.urandom(64 * KIB),
    "val/labels.txt": b"cat\ndog\n",
    "empty": b"",
    "README name with spaces": b"spaces are fine\n",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def read_tree(root: Path) -> dict[str, bytes]:
    """Every regular file below root (staging temporaries included), relative path -> bytes."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink():
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def staging_temps(root: Path) -> list[str]:
    if not root.exists():
        return []
    return sorted(
        str(Path(d, n).relative_to(root))
        for d, _, files in os.walk(root)
        for n in files
        if ".staging-" in n
    )


def sha256sum_accepts(dest: Path, manifest: Path) -> bool:
    """The real sha256sum -c, run in the destination, accepts the manifest."""
    done = subprocess.run(
        ["sha256sum", "-c", str(manifest)], cwd=dest, capture_output=True, check=False
    )
    return done.returncode == 0


def write_manifest(path: Path, files: dict[str, bytes], algorithm: str = "sha256") -> Path:
    lines = [f"{hashlib.new(algorithm, data).hexdigest()}  {rel}" for rel, data in files.items()]
    path.write_text("# made on the controller\n\n" + "\n".join(lines) + "\n")
    return path


def options(tmp_path: Path, **extra) -> dict:
    base = {
        "name": "imagenet",
        "source": str(tmp_path / "src"),
        "dest": str(tmp_path / "dest"),
        "state_dir": str(tmp_path / "state"),
        "parallel": 2,
    }
    return {**base, **extra}


@pytest.fixture
def dataset(tmp_path: Path) -> dict[str, bytes]:
    write_tree(tmp_path / "src", DATASET)
    return dict(DATASET)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below root with its type, bytes and mtime: what 'nothing changed' compares."""
    found = {}
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories + files:
            path = Path(directory, name)
            info = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            found[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, data)
    return found


def test_first_copy_stages_every_file_verified_and_sha256sum_accepts_it(tmp_path, dataset):
    source = tmp_path / "src"
    os.chmod(source / "val/labels.txt", 0o640)
    os.utime(source / "empty", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    os.symlink("part-000.bin", source / "train/link.bin")
    os.mkfifo(source / "train/fifo")

    result = ds.stage(options(tmp_path))

    dest = tmp_path / "dest"
    assert read_tree(dest) == dataset
    for rel, data in dataset.items():
        assert hashlib.sha256((dest / rel).read_bytes()).hexdigest() == sha256(data)
    assert not (dest / "train/link.bin").exists()
    assert not (dest / "train/fifo").exists()
    assert (dest / "val/labels.txt").stat().st_mode & 0o777 == 0o640
    assert (dest / "empty").stat().st_mtime_ns == 1_600_000_000_123_456_789
    total = sum(len(data) for data in dataset.values())
    assert result["changed"] is True
    assert (result["files_total"], result["bytes_total"]) == (len(dataset), total)
    assert (result["files_copied"], result["bytes_copied"]) == (len(dataset), total)
    assert (result["files_verified"], result["bytes_verified"]) == (len(dataset), total)
    assert result["files_skipped"] == 0
    assert result["ignored"] == 2
    assert result["recopied_corrupt"] == []
    assert result["summary"].startswith(f"imagenet: {len(dataset)} files ")

    manifest = tmp_path / "state" / "imagenet.sha256"
    lines = manifest.read_text().splitlines()
    assert lines == [f"{sha256(dataset[rel])}  {rel}" for rel in sorted(dataset)]
    check = subprocess.run(
        ["sha256sum", "--strict", "-c", str(manifest)],
        cwd=dest,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(dataset)

    state = json.loads((tmp_path / "state" / "imagenet.json").read_text())
    record = state["files"]["train/part-001.bin"]
    assert record["checksum"] == sha256(dataset["train/part-001.bin"])
    assert record["size"] == len(dataset["train/part-001.bin"])
    assert record["dest_mtime_ns"] == (dest / "train/part-001.bin").stat().st_mtime_ns
    assert staging_temps(tmp_path) == []


def test_second_run_copies_nothing_and_hashes_nothing(tmp_path, dataset):
    ds.stage(options(tmp_path))
    before = snapshot(tmp_path / "dest")

    again = ds.stage(options(tmp_path))

    assert again["changed"] is False
    assert (again["files_copied"], again["files_verified"]) == (0, 0)
    assert again["files_skipped"] == len(dataset)
    assert again["bytes_skipped"] == sum(len(data) for data in dataset.values())
    assert again["copy_mib_per_s"] == 0.0
    assert snapshot(tmp_path / "dest") == before


def test_corrupted_destination_file_is_found_and_recopied(tmp_path, dataset):
    ds.stage(options(tmp_path))
    victim = tmp_path / "dest" / "train/part-000.bin"
    with open(victim, "r+b") as handle:
        handle.seek(1000)
        handle.write(b"\0\1\2\3")

    result = ds.stage(options(tmp_path))

    assert result["recopied_corrupt"] == ["train/part-000.bin"]
    assert result["recopied_corrupt_count"] == 1
    assert result["files_copied"] == 1
    assert result["files_verified"] == 2  # the hash that found it, the read-back of the copy
    assert result["changed"] is True
    assert victim.read_bytes() == dataset["train/part-000.bin"]


def test_truncated_destination_file_is_recopied_without_hashing(tmp_path, dataset):
    ds.stage(options(tmp_path, verify_written=False))
    victim = tmp_path / "dest" / "train/part-001.bin"
    os.truncate(victim, 10)

    result = ds.stage(options(tmp_path, verify_written=False))

    assert result["recopied_corrupt"] == ["train/part-001.bin"]
    assert result["files_verified"] == 0
    assert victim.read_bytes() == dataset["train/part-001.bin"]


def test_verify_all_finds_corruption_that_keeps_size_and_mtime(tmp_path, dataset):
    ds.stage(options(tmp_path))
    victim = tmp_path / "dest" / "train/deep/er/part-002.bin"
    info = victim.stat()
    with open(victim, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 0xFF]))  # another byte, whatever the random data holds
    os.utime(victim, ns=(info.st_atime_ns, info.st_mtime_ns))

    trusting = ds.stage(options(tmp_path))
    assert trusting["files_copied"] == 0  # size and mtime match the record: trusted
    hashing = ds.stage(options(tmp_path, verify="all"))

    assert hashing["recopied_corrupt"] == ["train/deep/er/part-002.bin"]
    assert hashing["files_copied"] == 1
    assert hashing["files_verified"] == len(dataset) + 1
    assert hashing["verify_mib_per_s"] > 0
    assert victim.read_bytes() == dataset["train/deep/er/part-002.bin"]


def test_source_changed_between_runs_is_recopied(tmp_path, dataset):
    ds.stage(options(tmp_path))
    source = tmp_path / "src"
    (source / "val/labels.txt").write_bytes(b"cat\ndog\nbird\n")
    same_size = os.urandom(64 * KIB)
    (source / "train/deep/er/part-002.bin").write_bytes(same_size)
    os.utime(source / "train/deep/er/part-002.bin", ns=(1, 1_700_000_000_000_000_000))

    result = ds.stage(options(tmp_path))

    assert result["changed_at_source"] == 2
    assert result["files_copied"] == 2
    assert result["recopied_corrupt"] == []
    dest = tmp_path / "dest"
    assert (dest / "val/labels.txt").read_bytes() == b"cat\ndog\nbird\n"
    assert (dest / "train/deep/er/part-002.bin").read_bytes() == same_size
    sums = (tmp_path / "state/imagenet.sha256").read_text()
    assert f"{sha256(same_size)}  train/deep/er/part-002.bin" in sums


def test_only_staging_temporaries_are_removed_and_user_files_stay(tmp_path, dataset):
    dest = tmp_path / "dest"
    user_files = {
        ".hidden": b"mine",
        "train/.part-000.bin.staging-ABCDEF12": b"upper case: not ours",
        "train/.part-000.bin.staging-abc": b"too short: not ours",
        "train/part-000.bin.staging-abcdef12": b"no leading dot: not ours",
        "notes/.x.staging-abcdef123": b"nine characters: not ours",
    }
    write_tree(dest, user_files)
    temps = {"train/.part-000.bin.staging-0a1b2c3d": b"half", ".empty.staging-zz99yy88": b""}
    write_tree(dest, temps)

    result = ds.stage(options(tmp_path))

    assert result["temps_removed"] == 2
    assert result["extra_files"] == len(user_files)
    left = read_tree(dest)
    for rel, data in user_files.items():
        assert left[rel] == data
    assert not set(temps) & set(left)
    assert set(left) == set(user_files) | set(dataset)

    nothing_to_copy = ds.stage(options(tmp_path))
    write_tree(dest, {"val/.labels.txt.staging-12345678": b"x"})
    only_a_temp = ds.stage(options(tmp_path))
    assert nothing_to_copy["changed"] is False
    assert only_a_temp["changed"] is True
    assert only_a_temp["temps_removed"] == 1


DRIVER = textwrap.dedent(
    """
    import importlib.util, json, os, sys, time

    sys.path.insert(0, sys.argv[3])
    from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import dataset_files

    spec = importlib.util.spec_from_file_location("dataset_stage", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dataset_files.BUFFER_BYTES = 64 * 1024
    real_write = os.write

    def slow_write(fd, data):
        time.sleep(0.002)
        return real_write(fd, data)

    os.write = slow_write
    print(json.dumps(module.stage(json.loads(sys.argv[2]))))
    """
)


def being_written(dest: Path, dataset: dict[str, bytes]) -> list[str]:
    """Staging temporaries, and files under their final names that do not have their size."""
    if not dest.exists():
        return []
    return [
        rel
        for rel in (
            str(Path(d, n).relative_to(dest)) for d, _, files in os.walk(dest) for n in files
        )
        if rel not in dataset or (dest / rel).stat().st_size != len(dataset[rel])
    ]


def test_copy_killed_mid_file_leaves_no_partial_file_and_the_next_run_completes(tmp_path):
    dataset = {f"shard-{n:02d}.bin": os.urandom(1024 * KIB) for n in range(6)}
    write_tree(tmp_path / "src", dataset)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    dest = tmp_path / "dest"
    run = options(tmp_path, parallel=1)
    process = subprocess.Popen(
        [sys.executable, str(driver), str(MODULE_PATH), json.dumps(run), COLLECTIONS],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    seen: list[str] = []
    try:
        while not seen and process.poll() is None and time.monotonic() < deadline:
            seen = being_written(dest, dataset)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert seen, "the copy ended before a file being written was seen"
    assert process.returncode == -signal.SIGKILL
    complete = {rel: data for rel, data in read_tree(dest).items() if ".staging-" not in rel}
    assert len(complete) < len(dataset)
    for rel, data in complete.items():
        assert data == dataset[rel], f"{rel} is under its final name but not complete"
    left_behind = staging_temps(dest)
    assert left_behind
    assert not (tmp_path / "state" / "imagenet.sha256").exists()

    result = ds.stage(run)

    assert result["temps_removed"] == len(left_behind)
    assert result["files_copied"] == len(dataset) - len(complete)
    assert read_tree(dest) == dataset
    assert staging_temps(tmp_path) == []
    assert sha256sum_accepts(dest, tmp_path / "state" / "imagenet.sha256")
    assert ds.stage({**run, "verify": "all"})["files_copied"] == 0


def test_manifest_that_does_not_match_the_source_fails_and_stages_nothing_under_its_name(
    tmp_path, dataset
):
    lying = dict(dataset)
    lying["train/part-001.bin"] = b"what the controller hashed"
    manifest = write_manifest(tmp_path / "imagenet.sha256", lying)

    with pytest.raises(ds.StagingError) as failure:
        ds.stage(options(tmp_path, manifest=str(manifest)))

    message = str(failure.value)
    assert "train/part-001.bin" in message
    assert sha256(dataset["train/part-001.bin"]) in message
    assert sha256(b"what the controller hashed") in message
    assert "\n" not in message
    dest = tmp_path / "dest"
    assert not (dest / "train/part-001.bin").exists()
    assert staging_temps(tmp_path) == []
    assert not (tmp_path / "state" / "imagenet.sha256").exists()
    for rel, data in read_tree(dest).items():
        assert data == dataset[rel]
    state = json.loads((tmp_path / "state" / "imagenet.json").read_text())
    assert state["complete"] is False
    assert "train/part-001.bin" not in state["files"]


def test_manifest_selects_exactly_its_files(tmp_path, dataset):
    chosen = {rel: dataset[rel] for rel in ("val/labels.txt", "train/part-000.bin")}
    manifest = tmp_path / "m.sha256"
    manifest.write_text(
        f"{sha256(chosen['val/labels.txt'])} *val/labels.txt\n"
        f"{sha256(chosen['train/part-000.bin']).upper()}  ./train//part-000.bin\n"
    )

    result = ds.stage(options(tmp_path, manifest=str(manifest)))

    assert read_tree(tmp_path / "dest") == chosen
    assert result["files_total"] == 2
    assert result["bytes_total"] == sum(len(data) for data in chosen.values())


@pytest.fixture
def small_filesystem(tmp_path, monkeypatch):
    """A 1 MiB tmpfs (or, where mounting is not allowed, a free-space reading of 1 MiB)."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    if not mounted:
        monkeypatch.setattr(dataset_copy, "free_bytes", lambda path: 1024 * KIB)
        monkeypatch.setattr(dataset_copy, "mount_point", lambda path: str(mount))
    try:
        yield mount
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount)], check=True)


def test_not_enough_free_space_fails_before_copying_anything(tmp_path, small_filesystem):
    write_tree(tmp_path / "src", {f"f{n}": os.urandom(512 * KIB) for n in range(3)})
    dest = small_filesystem / "imagenet"
    write_tree(dest, {".f0.staging-deadbeef": b"left by a killed run"})

    with pytest.raises(ds.StagingError) as failure:
        ds.stage(options(tmp_path, dest=str(dest)))

    free = dataset_copy.free_bytes(str(dest))
    assert str(failure.value) == (
        f"dataset_staging_datasets[imagenet]: needs 1572864 bytes (1.5 MiB) on "
        f"{small_filesystem}, only {free} bytes ({format_size(free)}) free"
    )
    assert free <= 1024 * KIB
    assert read_tree(dest) == {}


def test_check_mode_reports_and_changes_nothing(tmp_path, dataset):
    write_tree(tmp_path / "dest", {"train/.part-000.bin.staging-0a1b2c3d": b"half"})
    before = snapshot(tmp_path)

    result = ds.stage(options(tmp_path), check_mode=True)

    assert snapshot(tmp_path) == before
    assert not (tmp_path / "state").exists()
    assert result["changed"] is True
    assert result["would_copy_files"] == len(dataset)
    assert result["would_copy_bytes"] == sum(len(data) for data in dataset.values())
    assert result["would_remove_temps"] == 1
    assert result["files_copied"] == 0

    ds.stage(options(tmp_path))
    staged = snapshot(tmp_path)
    again = ds.stage(options(tmp_path), check_mode=True)
    assert again["changed"] is False
    assert again["would_copy_files"] == 0
    assert snapshot(tmp_path) == staged


def test_dry_run_reports_as_check_mode_does(tmp_path, dataset):
    """The option the role's verify action asks with, in a run that is not in check mode."""
    before = snapshot(tmp_path)
    result = ds.stage({**options(tmp_path), "dry_run": True})
    assert snapshot(tmp_path) == before
    assert result["would_copy_files"] == len(dataset) and result["files_copied"] == 0
    with pytest.raises(ds.StagingError, match=r"^dry_run: mode sizes cannot run without"):
        ds.stage({**options(tmp_path), "mode": "sizes", "dry_run": True})


def controller_files(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, Path]:
    """The manifest and the sizes file a controller would send with a push."""
    manifest = write_manifest(tmp_path / "push.sha256", files)
    sizes = tmp_path / "push.sizes"
    sizes.write_text("".join(f"{len(data)}  {rel}\n" for rel, data in files.items()))
    return manifest, sizes


def test_plan_lists_exactly_the_missing_changed_and_corrupt_files(tmp_path, dataset):
    ds.stage(options(tmp_path))
    dest = tmp_path / "dest"
    with open(dest / "train/part-001.bin", "r+b") as handle:
        handle.write(b"rot")
    newer = dict(dataset)
    newer["val/labels.txt"] = b"cat\ndog\nfish\n"
    newer["val/new.txt"] = b"new file\n"
    manifest, sizes = controller_files(tmp_path, newer)
    files_from = tmp_path / "files-from"
    before = snapshot(dest)
    plan = {
        "name": "imagenet",
        "mode": "plan",
        "dest": str(dest),
        "state_dir": str(tmp_path / "state"),
        "manifest": str(manifest),
        "sizes": str(sizes),
        "files_from": str(files_from),
    }

    result = ds.stage(plan)

    wanted = ["train/part-001.bin", "val/labels.txt", "val/new.txt"]
    assert files_from.read_text().splitlines() == wanted
    assert result["to_copy"] == wanted
    assert result["to_copy_count"] == 3
    assert result["bytes_to_copy"] == sum(len(newer[rel]) for rel in wanted)
    assert result["recopied_corrupt"] == ["train/part-001.bin"]
    assert result["changed_at_source"] == 1
    assert result["files_skipped"] == len(newer) - 3
    assert result["changed"] is True
    assert snapshot(dest) == before

    (dest / "val/labels.txt").write_bytes(newer["val/labels.txt"])
    (dest / "val/new.txt").write_bytes(newer["val/new.txt"])
    (dest / "train/part-001.bin").write_bytes(dataset["train/part-001.bin"])
    settled = ds.stage(plan)
    assert files_from.read_text() == ""
    assert settled["to_copy"] == []
    assert settled["changed"] is False


def test_commit_moves_verified_files_rejects_a_tampered_one_and_clears_leftovers(tmp_path, dataset):
    ds.stage(options(tmp_path))
    dest = tmp_path / "dest"
    newer = dict(dataset)
    newer["val/labels.txt"] = b"cat\ndog\nfish\n"
    newer["val/new.txt"] = b"new file\n"
    newer["train/more/part-003.bin"] = os.urandom(100 * KIB)
    manifest, _ = controller_files(tmp_path, newer)
    incoming = tmp_path / "incoming"
    pushed = {rel: newer[rel] for rel in ("val/labels.txt", "val/new.txt")}
    write_tree(incoming, pushed)
    write_tree(incoming, {"train/more/part-003.bin": b"tampered on the way"})
    leftovers = {".foo.AbC123": b"partial", "deep/dir/.bar.XyZ789": b"partial"}
    write_tree(incoming, leftovers)
    commit = {
        "name": "imagenet",
        "mode": "commit",
        "dest": str(dest),
        "state_dir": str(tmp_path / "state"),
        "manifest": str(manifest),
        "incoming": str(incoming),
    }

    with pytest.raises(ds.StagingError) as failure:
        ds.stage(commit)

    assert "train/more/part-003.bin" in str(failure.value)
    assert not (dest / "train/more/part-003.bin").exists()
    for rel, data in pushed.items():
        assert (dest / rel).read_bytes() == data
    assert list(incoming.iterdir()) == []
    assert failure.value.result["temps_removed"] == len(leftovers)
    assert failure.value.result["files_copied"] == 2
    assert failure.value.result["changed_at_source"] == 1
    assert not (tmp_path / "state" / "imagenet.sha256").exists()

    write_tree(incoming, {"train/more/part-003.bin": newer["train/more/part-003.bin"]})
    result = ds.stage(commit)

    assert result["files_copied"] == 1
    assert result["files_total"] == len(newer)
    assert read_tree(dest) == newer
    assert list(incoming.iterdir()) == []
    assert sha256sum_accepts(dest, tmp_path / "state" / "imagenet.sha256")
    again = ds.stage(commit)
    assert again["changed"] is False
    assert again["files_verified"] == 0


def test_commit_fails_naming_a_file_neither_pushed_nor_in_place(tmp_path):
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    manifest = write_manifest(tmp_path / "m.sha256", {"a.bin": b"a"})
    commit = {
        "name": "imagenet",
        "mode": "commit",
        "dest": str(tmp_path / "dest"),
        "state_dir": str(tmp_path / "state"),
        "manifest": str(manifest),
        "incoming": str(incoming),
    }
    with pytest.raises(ds.StagingError, match=r"a\.bin is neither in .*incoming"):
        ds.stage(commit)


def test_measure_counts_files_and_bytes_and_writes_nothing(tmp_path, dataset):
    os.symlink("val", tmp_path / "src" / "link")
    before = snapshot(tmp_path)

    walked = ds.stage({"name": "imagenet", "mode": "measure", "source": str(tmp_path / "src")})
    manifest = write_manifest(tmp_path / "m.sha256", {"val/labels.txt": b"x"})
    listed = ds.stage(
        {
            "name": "imagenet",
            "mode": "measure",
            "source": str(tmp_path / "src"),
            "manifest": str(manifest),
        },
        check_mode=True,
    )

    assert walked["files_total"] == len(dataset)
    assert walked["bytes_total"] == sum(len(data) for data in dataset.values())
    assert walked["ignored"] == 1
    assert walked["changed"] is False
    assert (listed["files_total"], listed["bytes_total"]) == (1, len(dataset["val/labels.txt"]))
    after = snapshot(tmp_path)
    del after["m.sha256"]
    assert after == before


@pytest.mark.parametrize(
    ("lines", "number", "words"),
    [
        ([f"{'a' * 64}  ok", "not a checksum line"], 2, "expected"),
        (["# comment", "", f"{'a' * 40}  short"], 3, "40 hex digits"),
        ([f"{'a' * 64}  /etc/passwd"], 1, "absolute path"),
        ([f"{'a' * 64}  train/../../escape"], 1, "'..'"),
        ([f"{'a' * 64}  x", f"{'b' * 64}  ./x"], 2, "listed twice"),
        ([f"{'a' * 64}  dir/.x.staging-abcd1234"], 1, "staging temporary"),
    ],
)
def test_malformed_manifest_is_refused_naming_file_and_line(
    tmp_path, dataset, lines, number, words
):
    manifest = tmp_path / "bad.sha256"
    manifest.write_text("\n".join(lines) + "\n")

    with pytest.raises(ds.StagingError) as failure:
        ds.stage(options(tmp_path, manifest=str(manifest)))

    message = str(failure.value)
    assert f"manifest {manifest} line {number}: " in message
    assert words in message
    assert not (tmp_path / "dest").exists()


def test_manifest_entry_missing_at_source_is_named(tmp_path, dataset):
    manifest = write_manifest(tmp_path / "m.sha256", {**dataset, "gone.bin": b"x"})
    with pytest.raises(ds.StagingError, match=r"manifest entry gone\.bin: source file .*gone\.bin"):
        ds.stage(options(tmp_path, manifest=str(manifest)))
    with pytest.raises(ds.StagingError, match=r"manifest .*missing\.sha256: cannot be read"):
        ds.stage(options(tmp_path, manifest=str(tmp_path / "missing.sha256")))


@pytest.mark.parametrize("key", ["source", "dest", "state_dir", "incoming"])
def test_relative_paths_are_refused_naming_the_parameter(tmp_path, dataset, key):
    with pytest.raises(ds.StagingError) as failure:
        ds.stage(options(tmp_path, **{key: "data/imagenet"}))
    assert str(failure.value) == f"{key}: must be an absolute path, got 'data/imagenet'"


def test_source_missing_or_not_a_directory(tmp_path):
    with pytest.raises(ds.StagingError, match=r"^source: .* does not exist$"):
        ds.stage(options(tmp_path))
    (tmp_path / "src").write_text("a file")
    with pytest.raises(ds.StagingError, match=r"^source: .* is not a directory$"):
        ds.stage(options(tmp_path))


def test_unknown_checksum_is_refused_and_other_guaranteed_ones_work(tmp_path, dataset):
    with pytest.raises(ds.StagingError, match=r"^checksum: unknown algorithm 'crc32'"):
        ds.stage(options(tmp_path, checksum="crc32"))
    with pytest.raises(ds.StagingError, match=r"^checksum: unknown algorithm 'shake_128'"):
        ds.stage(options(tmp_path, checksum="shake_128"))

    ds.stage(options(tmp_path, checksum="md5"))

    manifest = tmp_path / "state" / "imagenet.sha256"
    assert re.match(r"^[0-9a-f]{32}  ", manifest.read_text())
    check = subprocess.run(
        ["md5sum", "-c", str(manifest)], cwd=tmp_path / "dest", capture_output=True, check=False
    )
    assert check.returncode == 0


def test_parallel_copy_gives_the_same_result_as_serial(tmp_path):
    files = {f"d{n % 5}/f{n:02d}": os.urandom(1000 + 137 * n) for n in range(40)}
    write_tree(tmp_path / "src", files)
    results, states = [], []
    for workers in (1, 4):
        dest, state = tmp_path / f"dest{workers}", tmp_path / f"state{workers}"
        result = ds.stage(options(tmp_path, dest=str(dest), state_dir=str(state), parallel=workers))
        assert read_tree(dest) == files
        for volatile in ("seconds", "copy_mib_per_s", "verify_mib_per_s", "summary", "bytes_free"):
            result.pop(volatile)
        results.append(result)
        states.append(
            (
                (state / "imagenet.sha256").read_text(),
                json.loads((state / "imagenet.json").read_text())["files"],
            )
        )

    assert results[0] == results[1]
    assert results[0]["files_copied"] == 40
    assert states[0] == states[1]


def test_extra_destination_files_are_counted_and_kept(tmp_path, dataset):
    write_tree(tmp_path / "dest", {"mine/notes.txt": b"keep me", "val/extra.txt": b"me too"})

    result = ds.stage(options(tmp_path))

    assert result["extra_files"] == 2
    assert (tmp_path / "dest/mine/notes.txt").read_bytes() == b"keep me"
    assert (tmp_path / "dest/val/extra.txt").read_bytes() == b"me too"


def test_lost_state_is_rebuilt_by_hashing_not_by_copying(tmp_path, dataset):
    ds.stage(options(tmp_path))
    for name in ("imagenet.json", "imagenet.sha256"):
        (tmp_path / "state" / name).unlink()

    result = ds.stage(options(tmp_path))

    assert result["files_copied"] == 0
    assert result["files_verified"] == len(dataset)
    assert (tmp_path / "state" / "imagenet.sha256").exists()


def test_sizes_are_shown_in_binary_units():
    assert format_size(5 * 1024**3) == "5.0 GiB"
    assert format_size(1536 * KIB) == "1.5 MiB"
    assert format_size(1000) == "1000 B"


def test_plan_without_sizes_or_source_is_refused(tmp_path):
    manifest = write_manifest(tmp_path / "m.sha256", {"a.bin": b"a"})
    plan = {
        "name": "imagenet",
        "mode": "plan",
        "dest": str(tmp_path / "dest"),
        "state_dir": str(tmp_path / "state"),
        "manifest": str(manifest),
        "files_from": str(tmp_path / "files-from"),
    }
    with pytest.raises(ds.StagingError, match=r"^mode plan needs sizes"):
        ds.stage(plan)
    assert not (tmp_path / "files-from").exists()


def run_module(tmp_path: Path, args: dict) -> dict:
    """The module as Ansible runs it: its file with the arguments, JSON on stdout, and its
    module_utils importable (Ansible ships them with it)."""
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    done = subprocess.run(
        [sys.executable, str(MODULE_PATH), str(args_file)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": COLLECTIONS},
    )
    return json.loads(done.stdout)


def test_module_entry_point_in_check_mode_and_on_failure(tmp_path, dataset):
    checked = run_module(tmp_path, {**options(tmp_path), "_ansible_check_mode": True})
    failed = run_module(tmp_path, {**options(tmp_path), "checksum": "crc32"})

    assert checked["changed"] is True
    assert checked["would_copy_files"] == len(dataset)
    assert checked["summary"].startswith(f"imagenet: would copy {len(dataset)} files")
    assert not (tmp_path / "dest").exists()
    assert failed["failed"] is True
    assert failed["msg"].startswith("checksum: unknown algorithm 'crc32'")


def test_manifest_mode_checksums_a_source_and_reads_again_only_what_changed(tmp_path, dataset):
    cache = tmp_path / "cache"
    made = {
        "name": "imagenet",
        "mode": "manifest",
        "source": str(tmp_path / "src"),
        "manifest": str(cache / "imagenet.sums"),
        "sizes": str(cache / "imagenet.sizes"),
        "state_dir": str(cache),
    }
    first = ds.stage(made)
    assert (first["files_total"], first["files_hashed"], first["changed"]) == (6, 6, True)
    assert parse_manifest(made["manifest"], "sha256") == {
        rel: sha256(data) for rel, data in dataset.items()
    }
    assert parse_sizes(made["sizes"]) == {rel: len(data) for rel, data in dataset.items()}

    again = ds.stage(made)
    assert (again["files_hashed"], again["changed"]) == (0, False)

    (tmp_path / "src" / "val" / "labels.txt").write_bytes(b"cat\ndog\nbird\n")
    changed = ds.stage(made)
    assert (changed["files_hashed"], changed["changed"]) == (1, True)
    assert parse_manifest(made["manifest"], "sha256")["val/labels.txt"] == sha256(
        b"cat\ndog\nbird\n"
    )


def test_sizes_mode_sizes_the_files_a_given_manifest_lists(tmp_path, dataset):
    manifest = write_manifest(
        tmp_path / "given.sha256", {"val/labels.txt": dataset["val/labels.txt"]}
    )
    done = ds.stage(
        {
            "name": "imagenet",
            "mode": "sizes",
            "source": str(tmp_path / "src"),
            "manifest": str(manifest),
            "sizes": str(tmp_path / "given.sizes"),
        }
    )
    assert (done["files_total"], done["bytes_total"]) == (1, len(dataset["val/labels.txt"]))
    assert (
        tmp_path / "given.sizes"
    ).read_text() == f"{len(dataset['val/labels.txt'])}  val/labels.txt\n"
