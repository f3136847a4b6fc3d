"""The collection as a user gets it: `ansible-galaxy collection build` of this checkout, a venv
with nothing but ansible-core, and `ansible-galaxy collection install` into an empty collections
path, with the collections requirements.yml names. Galaxy is out of reach here, so those two
(ansible.posix, community.general) are copied in from the ansible package's bundled copies
first; the install of ours then checks its dependency ranges (galaxy.yml) against them."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.integration.ansible import ANSIBLE_BIN, CHECKOUT, Controller

GALAXY = yaml.safe_load((CHECKOUT / "galaxy.yml").read_text())


def bundled_collection(fqcn: str) -> Path:
    """Where the ansible package installed its copy of a collection."""
    namespace, name = fqcn.split(".")
    for entry in map(Path, sys.path):
        folder = entry / "ansible_collections" / namespace / name
        if (folder / "MANIFEST.json").is_file():
            return folder
    raise FileNotFoundError(f"{fqcn} is not bundled with the ansible package here")


def requirements() -> list[str]:
    """The collections requirements.yml names."""
    data = yaml.safe_load((CHECKOUT / "requirements.yml").read_text())
    return [entry["name"] for entry in data["collections"]]


def build(out: Path) -> Path:
    """`ansible-galaxy collection build` of the checkout; the tarball's path."""
    out.mkdir(parents=True, exist_ok=True)
    done = run([str(ANSIBLE_BIN / "ansible-galaxy"), "collection", "build", "--force",
                "--output-path", str(out), str(CHECKOUT)], cwd=out)  # fmt: skip
    (tarball,) = out.glob("*.tar.gz")
    assert tarball.name in done.stdout
    return tarball


def install(folder: Path) -> Controller:
    """Build, make a venv with only ansible-core, install; the controller that runs it."""
    tarball = build(folder / "dist")
    venv = folder / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=folder)
    core = importlib.metadata.version("ansible-core")
    run([str(venv / "bin" / "pip"), "install", "--quiet", f"ansible-core=={core}"], cwd=folder)
    collections = folder / "collections"
    for fqcn in requirements():
        namespace, name = fqcn.split(".")
        target = collections / "ansible_collections" / namespace / name
        shutil.copytree(bundled_collection(fqcn), target)
    controller = Controller(venv / "bin", folder, {"ANSIBLE_COLLECTIONS_PATH": str(collections)})
    done = run(
        [str(venv / "bin" / "ansible-galaxy"), "collection", "install", "--offline",
         "-p", str(collections), str(tarball)],
        cwd=folder,
        env=controller.environment(),
    )  # fmt: skip
    assert "hostcheck.gpu_hosts:" in done.stdout and "installed successfully" in done.stdout, (
        done.stdout
    )
    return controller


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None):
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done
