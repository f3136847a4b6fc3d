"""What an installed Python distribution's metadata says, read one way by hostcheck (which
distributions claim PIL, torch's version) and by the hostcheck role's probe (the venv's
distributions and hostcheck's own RECORD): PEP 503 names, the headers of METADATA / PKG-INFO and
the rows of RECORD. This file is shared: the collection ships it as module_utils and the
hostcheck package as hostcheck._shared (pyproject.toml), so it uses the standard library only.

The pillow_simd role's probe (roles/pillow_simd/files/pillow_simd_probe.py) runs on the host
without the collection and keeps its own reader of the same files."""

import base64
import csv
import hashlib
import re


def normalize_name(name):
    """PEP 503: Pillow-SIMD, pillow_simd and pillow.simd are the same project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _header_lines(text):
    """(key, value) of each header line of METADATA / PKG-INFO (email format; the headers end
    at the first empty line, the description follows; continuation lines are skipped)."""
    for line in text.splitlines():
        if not line.strip():
            return
        if line[:1] in (" ", "\t"):
            continue
        key, sep, value = line.partition(":")
        if sep and key.strip():
            yield key.strip(), value.strip()


def parse_metadata(text):
    """The first value of each header."""
    headers = {}
    for key, value in _header_lines(text):
        headers.setdefault(key, value)
    return headers


def header_values(text, name):
    """Every value of one header (Requires-Dist), in order."""
    return [value for key, value in _header_lines(text) if key == name]


def parse_record(text):
    """RECORD: CSV rows `path,hash,size` as (path, hash or None, size or None); bad rows are
    skipped."""
    rows = []
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
        rows.append((row[0], digest, size))
    return rows


def record_hash(data):
    """A file's hash as RECORD writes it: sha256=<urlsafe base64 without padding>."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
