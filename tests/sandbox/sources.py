"""What makes `apt-get install` and `pip install` on this machine work: the files they read and
the folders those files name. Sandbox hosts see these read-only at the same paths."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

APT_PATHS = ("/etc/apt/sources.list",)
# Folders whose files are bound one by one, next to the host's own: the Ubuntu look-alikes'
# pins of Debian-only names (preferences.d) stay in force beside this machine's files.
APT_FOLDERS = (
    "/etc/apt/sources.list.d",
    "/etc/apt/apt.conf.d",
    "/etc/apt/trusted.gpg.d",
    "/etc/apt/preferences.d",
    "/etc/apt/auth.conf.d",
)
CERTIFICATES = ("/etc/ssl/certs/ca-certificates.crt",)
_PATHISH = re.compile(r"(?:file://)?(/[^\s'\",;]+)")
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
# The suite this machine's sources name; other suites' sources are written from them.
MACHINE_SUITE = "bookworm"


def apt_paths() -> list[str]:
    paths = [p for p in APT_PATHS if os.path.exists(p)]
    # the files, not the folders: roles add their own repositories next to them, and each OS
    # kind keeps its own apt configuration beside this machine's
    for folder in APT_FOLDERS:
        paths += sorted(str(p) for p in Path(folder).glob("*") if p.is_file())
    for sources in Path("/etc/apt/sources.list.d").glob("*.sources"):
        for line in sources.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() == "signed-by" and value.strip().startswith("/"):
                paths.append(value.strip())
    return paths


def pip_config_debug() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "debug"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return done.stdout


def pip_paths(debug_text: str, environ: dict[str, str]) -> list[str]:
    """Config files pip reads, and every existing path their values or PIP_* variables name."""
    paths: list[str] = []
    for line in debug_text.splitlines():
        match = re.match(r"\s+(/\S+), exists: True", line)
        if match:
            paths.append(match.group(1))
            continue
        if "=" in line or ":" in line:
            value = line.split("=", 1)[-1] if "=" in line else line.split(":", 1)[-1]
            paths += _PATHISH.findall(value)
    for key, value in environ.items():
        if key.startswith("PIP_"):
            paths += _PATHISH.findall(value)
    # file:///opt/pypi/simple names an index whose files live under /opt/pypi
    expanded = []
    for path in paths:
        expanded.append(path)
        if path.endswith("/simple"):
            expanded.append(os.path.dirname(path))
    return [p for p in dict.fromkeys(expanded) if os.path.exists(p)]


def shared_read_only() -> list[str]:
    """Paths bound read-only into every host, outermost first, no path inside another."""
    found = apt_paths() + pip_paths(pip_config_debug(), dict(os.environ))
    found += [p for p in CERTIFICATES if os.path.exists(p)]
    unique = sorted(set(found), key=lambda p: (p.count("/"), p))
    result: list[str] = []
    for path in unique:
        if not any(path == kept or path.startswith(kept.rstrip("/") + "/") for kept in result):
            result.append(path)
    return result


def session_environment(environ: dict[str, str], byte_compile: bool = True) -> dict[str, str]:
    """pip settings that live in environment variables, for /etc/environment of the hosts;
    byte_compile=False adds PIP_COMPILE=0 (pip reads PIP_NO_COMPILE=1 as compile=1)."""
    compile_settings = () if byte_compile else ("PIP_COMPILE", "PIP_NO_COMPILE")
    pip = {k: v for k, v in environ.items() if k.startswith("PIP_") and k not in compile_settings}
    if not byte_compile:
        pip["PIP_COMPILE"] = "0"
    return dict(sorted(pip.items()))


def debian_sources_text(suite: str) -> str:
    """This machine's Debian sources (same mirrors, same keys) for another suite."""
    if DEBIAN_SOURCES.exists():
        text = DEBIAN_SOURCES.read_text()
    else:
        legacy = Path("/etc/apt/sources.list")
        text = legacy.read_text() if legacy.exists() else ""
    return re.sub(rf"\b{MACHINE_SUITE}\b", suite, text)


def debian_sources_file(suite: str, folder: Path) -> Path:
    """A file with debian_sources_text(suite): this machine's own file for its own suite."""
    if suite == MACHINE_SUITE and DEBIAN_SOURCES.exists():
        return DEBIAN_SOURCES
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{suite}{'.sources' if DEBIAN_SOURCES.exists() else '.list'}"
    text = debian_sources_text(suite)
    if not path.exists() or path.read_text() != text:
        # renamed into place: a fleet of another run may be reading it
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text)
        partial.replace(path)
    return path
