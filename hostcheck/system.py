"""Read-only access to the host: files under /proc, /sys and /etc, and commands.

Checks read the host only through a `System`, so tests can point it at a directory of
fixture files (`System(root=tmp_path)`) and canned command outputs (`commands=`).
Nothing here writes to the host.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str = ""


class System:
    def __init__(
        self,
        root: str | os.PathLike = "/",
        commands: Mapping[tuple[str, ...], CommandResult | Callable[[], CommandResult]]
        | None = None,
        env: Mapping[str, str] | None = None,
        statvfs: Mapping[str, os.statvfs_result] | None = None,
    ) -> None:
        self.root = Path(root)
        self._statvfs = dict(statvfs or {})
        self._commands = dict(commands) if commands is not None else None
        self.env = dict(os.environ if env is None else env)

    @property
    def is_real(self) -> bool:
        return self.root == Path("/") and self._commands is None

    def path(self, path: str | os.PathLike) -> Path:
        """The real location of an absolute host path (under the fixture root in tests)."""
        text = os.fspath(path)
        if self.root == Path("/"):
            return Path(text)
        return self.root / text.lstrip("/")

    def read(self, path: str) -> str | None:
        """File content, or None when the file is absent or unreadable."""
        try:
            return self.path(path).read_text(errors="replace")
        except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError):
            return None
        except OSError:
            return None

    def read_bytes(self, path: str) -> bytes | None:
        """File content as bytes, or None when the file is absent or unreadable."""
        try:
            return self.path(path).read_bytes()
        except OSError:
            return None

    def read_value(self, path: str) -> str | None:
        text = self.read(path)
        return None if text is None else text.strip()

    def read_int(self, path: str) -> int | None:
        text = self.read_value(path)
        try:
            return None if text is None else int(text)
        except ValueError:
            return None

    def exists(self, path: str) -> bool:
        return self.path(path).exists()

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def glob(self, pattern: str) -> list[str]:
        """Host paths matching an absolute glob pattern, sorted."""
        base = self.path("/")
        found = glob.glob(os.fspath(self.path(pattern)))
        if self.root == Path("/"):
            return sorted(found)
        return sorted("/" + os.path.relpath(p, base) for p in found)

    def realpath(self, path: str) -> str:
        if self.root == Path("/"):
            return os.path.realpath(path)
        return path

    def statvfs(self, path: str) -> os.statvfs_result:
        if path in self._statvfs:
            return self._statvfs[path]
        return os.statvfs(self.path(path))

    def which(self, name: str) -> str | None:
        if self._commands is not None:
            return name if any(key[0] == name for key in self._commands) else None
        return shutil.which(name)

    def run(self, argv: Sequence[str], timeout: float = 10.0) -> CommandResult | None:
        """Run a command; None when it does not exist. Canned results in tests."""
        if self._commands is not None:
            canned = self._commands.get(tuple(argv))
            if canned is None:
                return None
            return canned() if callable(canned) else canned
        if shutil.which(argv[0]) is None:
            return None
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return CommandResult(returncode=-1, stdout="", stderr=str(exc))
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo in bytes."""
        values: dict[str, int] = {}
        for line in (self.read("/proc/meminfo") or "").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if not parts:
                continue
            try:
                number = int(parts[0])
            except ValueError:
                continue
            values[key.strip()] = number * 1024 if len(parts) > 1 and parts[1] == "kB" else number
        return values

    def total_memory(self) -> int:
        return self.meminfo().get("MemTotal", 0)
