"""Which installed Python distributions claim a top-level package, from their metadata.

Reads the `*.dist-info` directories of one site-packages directory through `System`:
METADATA for the name and version, RECORD for the files each distribution installed
(with their sha256), so two distributions that both installed `PIL/` (stock Pillow
pulled back in over pillow-simd) are both seen, and the hash of a file on disk tells
whose copy is the one that is there now. Legacy `*.egg-info` directories are read from
PKG-INFO and top_level.txt (no hashes).
"""

from __future__ import annotations

import csv
import io
import posixpath
from dataclasses import dataclass

from hostcheck._shared.distributions import normalize_name, parse_metadata
from hostcheck._shared.distributions import parse_record as shared_parse_record
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


def _top_component(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")).split("/", 1)[0]


def parse_record(text: str) -> list[RecordEntry]:
    """RECORD: CSV rows `path,hash,size`; hash and size may be empty. Bad rows are skipped."""
    return [RecordEntry(*row) for row in shared_parse_record(text)]


def format_record(entries: list[RecordEntry]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for e in entries:
        writer.writerow([e.path, e.hash or "", "" if e.size is None else e.size])
    return out.getvalue()


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
