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


def build(source: Path, cache: Path) -> dict:
    if not (source / "pyproject.toml").is_file():
        raise WheelError(f"{source}: no pyproject.toml here")
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
            kept.parent.mkdir(parents=True, exist_ok=True)
            partial = kept.with_name(f".{kept.name}.{os.getpid()}")
            shutil.copyfile(wheels[0], partial)
            os.replace(partial, kept)
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
