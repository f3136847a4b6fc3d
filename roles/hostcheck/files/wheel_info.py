"""Build or read the hostcheck wheel on the controller; print what the role needs as JSON.

    python wheel_info.py build SOURCE CACHE   build from the checkout SOURCE, keep it in CACHE
    python wheel_info.py inspect WHEEL        read a prebuilt wheel

Output: {"path", "filename", "name", "version", "record"}, where record is the wheel's RECORD
lines that carry a hash. Wheels are not byte-reproducible (zip timestamps change with every
build), so the role compares content through RECORD: pip copies these lines into the installed
distribution's RECORD, so the installed files match the wheel exactly when every line is there.

The source is copied to a temporary folder before building, so builds never write into the
checkout (setuptools' build/ and *.egg-info) and parallel runs never share a build folder.
Built wheels are kept in CACHE/<content digest>/, written under a temporary name and renamed.
A source tree built before (the same paths, modes and bytes of everything the build copies) is
not built again: CACHE/sources/<tree digest> names its wheel (pip wheel takes seconds of CPU on
every converge otherwise).
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SKIP = shutil.ignore_patterns(
    ".git", ".venv", "venv", ".cache", ".tox", "build", "dist", "*.egg-info", "__pycache__",
    ".*_cache", ".hypothesis", "reports", "node_modules",
)  # fmt: skip


class WheelError(Exception):
    """Printed as one line on standard error, exit 1."""


def inspect(wheel: Path) -> dict:
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            dist_info = sorted({n.split("/")[0] for n in names if ".dist-info/" in n})
            if len(dist_info) != 1:
                raise WheelError(f"{wheel}: not a wheel (no single .dist-info folder)")
            metadata = archive.read(f"{dist_info[0]}/METADATA").decode()
            record = archive.read(f"{dist_info[0]}/RECORD").decode()
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise WheelError(f"{wheel}: cannot read the wheel: {exc}") from None
    headers = email.parser.Parser().parsestr(metadata, headersonly=True)
    lines = sorted(line for line in record.splitlines() if ",sha256=" in line)
    return {
        "path": str(wheel),
        "filename": wheel.name,
        "name": headers["Name"],
        "version": headers["Version"],
        "record": lines,
    }


def tree_digest(source: Path) -> str:
    """sha256 over the relative path, mode and bytes (a link's target) of every file and link
    the build copies, in a fixed order."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(source):
        ignored = SKIP(root, [*dirs, *files])
        dirs[:] = sorted(d for d in dirs if d not in ignored)
        links = [d for d in dirs if Path(root, d).is_symlink()]  # copied as links, not walked
        for name in sorted([*(f for f in files if f not in ignored), *links]):
            path = Path(root, name)
            digest.update(f"{path.relative_to(source)}\0{path.lstat().st_mode:o}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            else:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


def built_before(pointer: Path) -> dict | None:
    """The wheel a source tree was built into, when it is still in the cache and readable."""
    try:
        wheel = Path(pointer.read_text().strip())
        return inspect(wheel) if wheel.is_file() else None
    except (OSError, WheelError):
        return None


def write_whole(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


def build(source: Path, cache: Path) -> dict:
    if not (source / "pyproject.toml").is_file():
        raise WheelError(f"{source}: no pyproject.toml here")
    pointer = cache / "sources" / tree_digest(source)
    known = built_before(pointer)
    if known is not None:
        return known
    with tempfile.TemporaryDirectory(prefix="hostcheck-wheel-") as scratch:
        tree, out = Path(scratch) / "src", Path(scratch) / "out"
        shutil.copytree(source, tree, ignore=SKIP, symlinks=True)
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out)]
        done = subprocess.run([*argv, str(tree)], capture_output=True, text=True, check=False)
        wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
        if done.returncode != 0 or len(wheels) != 1:
            raise WheelError(f"pip wheel {source} failed: {(done.stderr or done.stdout)[-2000:]}")
        info = inspect(wheels[0])
        digest = hashlib.sha256("\n".join(info["record"]).encode()).hexdigest()[:16]
        kept = cache / digest / wheels[0].name
        if not kept.is_file():
            write_whole(kept, wheels[0].read_bytes())
    write_whole(pointer, f"{kept}\n".encode())
    return {**info, "path": str(kept)}


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 3 and argv[0] == "build":
            info = build(Path(argv[1]).resolve(), Path(argv[2]).resolve())
        elif len(argv) == 2 and argv[0] == "inspect":
            info = inspect(Path(argv[1]))
        else:
            raise WheelError("usage: wheel_info.py build SOURCE CACHE | inspect WHEEL")
    except WheelError as exc:
        print(f"wheel_info: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
