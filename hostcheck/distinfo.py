"""Which installed Python distributions claim a top-level package, from their metadata.

Reads the `*.dist-info` directories of one site-packages directory through `System`:
METADATA for the name and version, RECORD for the files each distribution installed
(with their sha256), so two distributions that both installed `PIL/` (stock Pillow
pulled back in over pillow-simd) are both seen, and the hash of a file on disk tells
whose copy is the one that is there now. Legacy `*.egg-info` directories are read from
PKG-INFO and top_level.txt (no hashes).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import posixpath
import re
from dataclasses import dataclass

from hostcheck.system import System


@dataclass(frozen=True)
class RecordEntry:
    path: str
    hash: str | None  # "sha256=<urlsafe base64 without padding>", as in RECORD
    size: int | None


@dataclass(frozen=True)
class InstalledDist:
    name: str
    version: str
    metadata_dir: str  # host path of the .dist-info / .egg-info directory
    entries: tuple[RecordEntry, ...] = ()
    top_level: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return normalize_name(self.name)

    def claims(self, package: str) -> bool:
        """Installed files under `package/` (or top_level.txt naming it)."""
        if package in self.top_level:
            return True
        return any(_top_component(e.path) == package for e in self.entries)

    def entry(self, path: str) -> RecordEntry | None:
        for item in self.entries:
            if posixpath.normpath(item.path) == path:
                return item
        return None

    def label(self) -> str:
        return f"{self.name} {self.version}"


def normalize_name(name: str) -> str:
    """PEP 503: Pillow-SIMD, pillow_simd and pillow.simd are the same project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _top_component(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")).split("/", 1)[0]


def parse_record(text: str) -> list[RecordEntry]:
    """RECORD: CSV rows `path,hash,size`; hash and size may be empty. Bad rows are skipped."""
    entries = []
    for line in re.split(r"\r\n|\r|\n", text):
        if '"' not in line:
            row = line.split(",")  # what csv gives for a line without quotes
        else:
            try:
                row = next(csv.reader([line]), [])
            except csv.Error:
                continue
        if not row or not row[0]:
            continue
        digest = row[1] if len(row) > 1 and row[1] else None
        size_text = row[2] if len(row) > 2 else ""
        size = int(size_text) if size_text.isascii() and size_text.isdigit() else None
        entries.append(RecordEntry(row[0], digest, size))
    return entries


def format_record(entries: list[RecordEntry]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for e in entries:
        writer.writerow([e.path, e.hash or "", "" if e.size is None else e.size])
    return out.getvalue()


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def parse_metadata(text: str) -> dict[str, str]:
    """The first value of each header of METADATA / PKG-INFO (email format; the headers
    end at the first empty line, the description follows)."""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t"):
            continue  # continuation line
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in headers:
            headers[key.strip()] = value.strip()
    return headers


def installed_dists(
    system: System, site_dir: str, package: str | None = None
) -> list[InstalledDist]:
    """The distributions whose metadata directory is in `site_dir`, sorted by directory;
    with `package`, only those that claim it (and only their RECORD files are parsed:
    torch's alone has thousands of lines)."""
    found = []
    for entry in system.listdir(site_dir):
        directory = posixpath.join(site_dir, entry)
        if entry.endswith(".dist-info"):
            raw = system.read_bytes(posixpath.join(directory, "RECORD")) or b""
            if package is not None and f"{package}/".encode() not in raw:
                continue  # searched undecoded: torch's RECORD alone is over a megabyte
            record = raw.decode(errors="replace")
            meta = system.read(posixpath.join(directory, "METADATA"))
            entries = tuple(parse_record(record))
            top = ()
        elif entry.endswith(".egg-info"):
            meta = system.read(posixpath.join(directory, "PKG-INFO"))
            entries = ()
            top = tuple((system.read(posixpath.join(directory, "top_level.txt")) or "").split())
        else:
            continue
        if meta is None:
            continue
        if (
            package is not None
            and package not in top
            and not any(_top_component(e.path) == package for e in entries)
        ):
            continue
        headers = parse_metadata(meta)
        if "Name" not in headers:
            continue
        found.append(
            InstalledDist(
                name=headers["Name"],
                version=headers.get("Version", "?"),
                metadata_dir=directory,
                entries=entries,
                top_level=top,
            )
        )
    return found
