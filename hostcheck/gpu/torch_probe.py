"""torch's version and CUDA build, and cuDNN's wheel, from the installed distribution files of a
venv or of the Python running hostcheck. torch is never imported: its CUDA version comes from
torch/version.py, read without running it."""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hostcheck._shared.distributions import normalize_name, parse_metadata
from hostcheck.system import System


@dataclass
class TorchInfo:
    where: str
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    cudnn: str | None = None  # version of the nvidia-cudnn-cu* wheel
    cudnn_package: str | None = None
    problem: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


_CUDNN = re.compile(r"^nvidia-cudnn-cu\d+$")


def parse_version_py(text: str) -> dict[str, Any]:
    """Literal assignments of a module such as torch/version.py, without running it:
    `cuda: Optional[str] = '12.1'` -> {'cuda': '12.1'}."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = literal
    return values


def _site_dists(paths: list[str]) -> tuple[str | None, str | None]:
    """torch's and cuDNN's .dist-info folders in these site folders, found by their names
    (name-version, normalized), so no other metadata is read."""
    torch = cudnn = None
    for site in paths:
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            name = normalize_name(entry[: -len(".dist-info")].rsplit("-", 1)[0])
            if name == "torch" and torch is None:
                torch = os.path.join(site, entry)
            elif _CUDNN.match(name) and cudnn is None:
                cudnn = os.path.join(site, entry)
    return torch, cudnn


def _metadata(dist_info: str) -> dict[str, str]:
    try:
        text = Path(dist_info, "METADATA").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return parse_metadata(text)


def read_torch(system: System, venv: str | None) -> TorchInfo:
    """torch's version and CUDA build from its distribution files, and cuDNN's wheel."""
    if venv:
        where = venv
        sites = system.glob(f"{venv.rstrip('/')}/lib/python3*/site-packages")
        if not sites:
            return TorchInfo(where, problem=f"no lib/python3*/site-packages under {venv}")
        torch, cudnn = _site_dists([str(system.path(s)) for s in sites])
    else:
        where = "the Python running hostcheck"
        torch, cudnn = _site_dists([p for p in sys.path if p and os.path.isdir(p)])
    info = TorchInfo(where)
    if cudnn is not None:
        metadata = _metadata(cudnn)
        info.cudnn = metadata.get("Version")
        info.cudnn_package = normalize_name(metadata.get("Name") or "")
    if torch is None:
        info.problem = f"torch is not installed in {where}"
        return info
    info.version = _metadata(torch).get("Version")
    try:
        text = Path(os.path.dirname(torch), "torch", "version.py").read_text(errors="replace")
    except OSError as exc:
        info.problem = f"cannot read torch/version.py: {exc.strerror or exc}"
        return info
    values = parse_version_py(text)
    for key in ("cuda", "hip"):
        value = values.get(key)
        setattr(info, key, value if isinstance(value, str) else None)
    return info
