"""What a dataset is, for the dataset_stage module (plugins/modules/dataset_stage.py): the files
of a source folder or of a manifest (checksums in sha256sum's format) and a sizes file, and the
modes that only list and checksum them: measure, and manifest and sizes, which the
dataset_staging role runs on the controller for a dataset it pushes with rsync. Standard
library only: it runs on the hosts."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from typing import NamedTuple

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_files import (
    STAGING_TEMP,
    StagingError,
    atomic_write,
    hash_file,
    rate,
    run_parallel,
    walk,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import format_size


class Wanted(NamedTuple):
    rel: str
    size: int | None
    mtime_ns: int | None
    checksum: str | None


def check_algorithm(name: str) -> str:
    if name not in hashlib.algorithms_guaranteed or name.startswith("shake_"):
        choices = sorted(a for a in hashlib.algorithms_guaranteed if not a.startswith("shake_"))
        raise StagingError(f"checksum: unknown algorithm {name!r}, use one of {', '.join(choices)}")
    return name


def clean_relative(path: str, where: str) -> str:
    """`path` as a/b/c; absolute paths and .. components are refused, naming `where`."""
    if path.startswith("/"):
        raise StagingError(f"{where}: absolute path {path!r}, only relative paths are allowed")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise StagingError(f"{where}: path {path!r} has a '..' component")
    if not parts:
        raise StagingError(f"{where}: empty path")
    if STAGING_TEMP.match(parts[-1]):
        raise StagingError(f"{where}: {path!r} is named like a staging temporary")
    return "/".join(parts)


def read_lines(path: str, what: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise StagingError(f"{what} {path}: cannot be read: {error.strerror}") from error
    return data.decode("utf-8", "surrogateescape").split("\n")


def unescape(name: str) -> str:
    """Undo sha256sum's escaping of a name that contains a backslash or a newline."""
    out, chars = [], iter(name)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append("\n" if following == "n" else following)
        else:
            out.append(char)
    return "".join(out)


def escape(name: str) -> tuple[str, str]:
    """The sha256sum line prefix and name for `name`."""
    if "\\" in name or "\n" in name:
        return "\\", name.replace("\\", "\\\\").replace("\n", "\\n")
    return "", name


def parse_manifest(path: str, algorithm: str) -> dict[str, str]:
    """Relative path -> lowercase hex checksum, in file order."""
    digits = hashlib.new(algorithm).digest_size * 2
    entries: dict[str, str] = {}
    line_pattern = re.compile(r"\A(\\?)([0-9a-fA-F]+) [ *](.+)\Z", re.DOTALL)
    for number, raw in enumerate(read_lines(path, "manifest"), start=1):
        line = raw.rstrip("\r").lstrip(" \t")
        if not line.strip() or line.startswith("#"):
            continue
        where = f"manifest {path} line {number}"
        match = line_pattern.match(line)
        if not match:
            raise StagingError(f"{where}: expected '<{algorithm} hex>  <relative/path>'")
        escaped, checksum, name = match.groups()
        if len(checksum) != digits:
            raise StagingError(
                f"{where}: checksum has {len(checksum)} hex digits, {algorithm} has {digits}"
            )
        rel = clean_relative(unescape(name) if escaped else name, where)
        if rel in entries:
            raise StagingError(f"{where}: {rel!r} is listed twice")
        entries[rel] = checksum.lower()
    return entries


def parse_sizes(path: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for number, raw in enumerate(read_lines(path, "sizes"), start=1):
        line = raw.rstrip("\r").strip(" \t")
        if not line or line.startswith("#"):
            continue
        size, dummy, name = line.partition(" ")
        if not size.isdigit() or not name.strip():
            raise StagingError(f"sizes {path} line {number}: expected '<bytes>  <relative/path>'")
        sizes[clean_relative(name.lstrip(" "), f"sizes {path} line {number}")] = int(size)
    return sizes


def source_files(source: str) -> tuple[list[Wanted], int]:
    """Every regular file under `source` with its size and mtime, and the count of the rest."""
    wanted, ignored = [], 0
    for rel, entry in walk(source):
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISREG(info.st_mode) and not STAGING_TEMP.match(entry.name):
            wanted.append(Wanted(rel, info.st_size, info.st_mtime_ns, None))
        else:
            ignored += 1
    wanted.sort(key=lambda item: item.rel)
    return wanted, ignored


def manifest_files(
    manifest: dict[str, str], source: str | None, sizes: dict[str, int] | None = None
) -> list[Wanted]:
    wanted = []
    for rel, checksum in manifest.items():
        size = mtime_ns = None
        if source is not None:
            path = os.path.join(source, rel)
            try:
                info = os.stat(path)
            except OSError as error:
                raise StagingError(
                    f"manifest entry {rel}: source file {path} {error.strerror.lower()}"
                ) from error
            if not stat.S_ISREG(info.st_mode):
                raise StagingError(f"manifest entry {rel}: source {path} is not a regular file")
            size, mtime_ns = info.st_size, info.st_mtime_ns
        elif sizes is not None:
            size = sizes.get(rel)
            if size is None:
                raise StagingError(f"manifest entry {rel}: no size for it in the sizes file")
        wanted.append(Wanted(rel, size, mtime_ns, checksum))
    wanted.sort(key=lambda item: item.rel)
    return wanted


def measure(options: dict) -> dict:
    if options["manifest"]:
        manifest = parse_manifest(options["manifest"], options["checksum"])
        wanted, ignored = manifest_files(manifest, options["source"]), 0
    else:
        wanted, ignored = source_files(options["source"])
    files, size = len(wanted), sum(item.size for item in wanted)
    return {
        "changed": False,
        "files_total": files,
        "bytes_total": size,
        "ignored": ignored,
        "summary": f"{options['name']}: {files} files, {format_size(size)}",
    }


def make_manifest(options: dict) -> dict:
    """Checksum every file of a source (the controller's, for a push) into a manifest and a
    sizes file; files whose size and mtime match the last run's cache are not read again."""
    source, algorithm, name = options["source"], options["checksum"], options["name"]
    wanted, ignored = source_files(source)
    cache_path = os.path.join(options["state_dir"], f"{name}.source.json")
    try:
        with open(cache_path) as handle:
            cached = json.load(handle)
        known = cached["files"] if cached.get("checksum") == algorithm else {}
    except (OSError, ValueError, KeyError, TypeError):
        known = {}
    sums = {
        item.rel: known[item.rel][2]
        for item in wanted
        if known.get(item.rel, [None, None])[:2] == [item.size, item.mtime_ns]
    }

    def checksum_of(item: Wanted) -> str:
        path = os.path.join(source, item.rel)
        checksum = hash_file(path, algorithm)
        after = os.stat(path)
        if (after.st_size, after.st_mtime_ns) != (item.size, item.mtime_ns):
            raise StagingError(f"{name}: {path} changed while it was checksummed; run again")
        return checksum

    started = time.monotonic()
    to_hash = [item for item in wanted if item.rel not in sums]
    for item, checksum in run_parallel(checksum_of, to_hash, options["parallel"]):
        sums[item.rel] = checksum
    lines, sizes = [], []
    for item in wanted:
        prefix, escaped = escape(item.rel)
        lines.append(f"{prefix}{sums[item.rel]}  {escaped}\n")
        sizes.append(f"{item.size}  {item.rel}\n")
    text = "".join(lines).encode()
    try:
        with open(options["manifest"], "rb") as handle:
            changed = handle.read() != text
    except OSError:
        changed = True
    os.makedirs(options["state_dir"], exist_ok=True)
    atomic_write(options["manifest"], text)
    atomic_write(options["sizes"], "".join(sizes).encode())
    files = {item.rel: [item.size, item.mtime_ns, sums[item.rel]] for item in wanted}
    atomic_write(cache_path, json.dumps({"checksum": algorithm, "files": files}).encode())
    seconds = time.monotonic() - started
    hashed_bytes = sum(item.size for item in to_hash)
    return {
        "changed": changed,
        "files_total": len(wanted),
        "bytes_total": sum(item.size for item in wanted),
        "files_hashed": len(to_hash),
        "bytes_hashed": hashed_bytes,
        "ignored": ignored,
        "hash_mib_per_s": rate(hashed_bytes, seconds),
        "summary": f"{name}: {len(wanted)} files checksummed, {len(to_hash)} read again",
    }


def write_sizes(options: dict) -> dict:
    """The sizes file for a given manifest, from the source files it lists."""
    manifest = parse_manifest(options["manifest"], options["checksum"])
    wanted = manifest_files(manifest, options["source"])
    atomic_write(options["sizes"], "".join(f"{w.size}  {w.rel}\n" for w in wanted).encode())
    size = sum(item.size for item in wanted)
    return {
        "changed": False,
        "files_total": len(wanted),
        "bytes_total": size,
        "summary": f"{options['name']}: {len(wanted)} files, {format_size(size)}",
    }
