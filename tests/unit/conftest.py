"""Fixture hosts: a directory tree standing in for /, and canned command outputs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hostcheck.checks.base import CheckContext, RunOptions
from hostcheck.system import CommandResult, System


class FakeHost:
    """Build a fake root file system; `system()` gives the System that reads it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: dict[tuple[str, ...], CommandResult] = {}
        self.filesystems: dict[str, os.statvfs_result] = {}

    def file(self, path: str, content: str) -> Path:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return target

    def command(
        self, argv: tuple[str, ...] | list[str], stdout: str, rc: int = 0, stderr: str = ""
    ) -> None:
        self.commands[tuple(argv)] = CommandResult(rc, stdout, stderr)

    def filesystem(
        self, path: str, size: int, free: int, avail: int | None = None, block: int = 4096
    ) -> None:
        """statvfs() of `path` reports this size and free space (bytes)."""
        avail = free if avail is None else avail
        self.filesystems[path] = os.statvfs_result(
            (block, block, size // block, free // block, avail // block, 1000, 900, 900, 0, 255)
        )

    def system(self) -> System:
        return System(root=self.root, commands=self.commands, statvfs=self.filesystems)

    def context(
        self, config: dict, options: RunOptions | None = None, require_gpu: bool = False
    ) -> CheckContext:
        return CheckContext(
            system=self.system(),
            config=config,
            options=options or RunOptions(),
            require_gpu=require_gpu,
        )


@pytest.fixture
def fake_host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "root")


@pytest.fixture(scope="session")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One real `hostcheck run --profile quick` JSON report of this machine."""
    import json
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("real") / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostcheck",
            "run",
            "--profile",
            "quick",
            "--report",
            f"json:{path}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(path.read_text())


@pytest.fixture
def root_only_venv(tmp_path):
    """A venv-like tree (bin/python, bin/hostcheck, site-packages with hostcheck and a .pth)
    under a root-owned folder, owned and writable by root only; made as root."""
    top = tmp_path / "opt"
    top.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    root = top / "train"
    for folder in ("bin", "lib/python3.11/site-packages/hostcheck"):
        (root / folder).mkdir(parents=True, mode=0o755)
    (root / "bin" / "python").symlink_to(sys.executable)
    (root / "bin" / "hostcheck").write_text("#!/bin/sh\n")
    (root / "lib/python3.11/site-packages/hostcheck/__init__.py").write_text("")
    (root / "lib/python3.11/site-packages/distutils-precedence.pth").write_text("")
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return root
