"""The collection as a user gets it: `ansible-galaxy collection build` of this checkout, a venv
with nothing but ansible-core, and `ansible-galaxy collection install` into an empty collections
path, with the collections requirements.yml names. Galaxy is out of reach here, so those two
(ansible.posix, community.general) are copied in from the ansible package's bundled copies
first; the install of ours then checks its dependency ranges (galaxy.yml) against them.
install(folder, OLDEST_CORE) does the same with the oldest ansible-core that meta/runtime.yml's
requires_ansible claims (the newest patch release of that minor version)."""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import yaml

from tests.integration.ansible import ANSIBLE_BIN, CHECKOUT, Controller
from tests.paths import MACHINE_CACHE

GALAXY = yaml.safe_load((CHECKOUT / "galaxy.yml").read_text())


def oldest_core() -> str:
    """The pip requirement of the oldest ansible-core the collection claims: requires_ansible
    '>=2.16.0' gives 'ansible-core>=2.16.0,<2.17'."""
    claim = yaml.safe_load((CHECKOUT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    match = re.fullmatch(r">=(\d+)\.(\d+)\.\d+", claim)
    if match is None:
        raise ValueError(f"meta/runtime.yml: requires_ansible {claim!r} is not '>=X.Y.Z'")
    major, minor = match.groups()
    return f"ansible-core{claim},<{major}.{int(minor) + 1}"


OLDEST_CORE = oldest_core()


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


def install(folder: Path, core: str | None = None) -> Controller:
    """Build, make a venv with only ansible-core (the pip requirement core, else this venv's
    version), install; the controller that runs it."""
    tarball = build(folder / "dist")
    venv = folder / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=folder)
    core = core or f"ansible-core=={importlib.metadata.version('ansible-core')}"
    run([str(venv / "bin" / "pip"), "install", "--quiet", core], cwd=folder)
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


# The stand-in for ansible-test's pip bootstrap script, which it downloads from a host out of
# reach here: the interpreter's own pip (ensurepip), then `pip install` of what it asks for
# (trusting the system's certificates, as this machine's pip does).
GET_PIP = """import ensurepip, importlib, runpy, sys
ensurepip.bootstrap()
importlib.invalidate_caches()
wanted = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
sys.argv = ["pip", "install", "--upgrade", "--cert", "/etc/ssl/certs/ca-certificates.crt", *wanted]
runpy.run_module("pip", run_name="__main__")
"""


def sanity(tarball: Path, folder: Path, *tests: str) -> subprocess.CompletedProcess:
    """`ansible-test sanity` (the tests that need no container) on the built collection, as
    published: the tarball unpacked under ansible_collections/hostcheck/gpu_hosts with the
    checkout's tests/sanity ignore files, in a git repository of its own (ansible-test lists the
    files through git). Its HOME, holding GET_PIP and the venvs ansible-test makes (keyed by
    their requirements), is in the machine-wide cache; one sanity run at a time uses it."""
    root = folder / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    root.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(root, filter="data")
    shutil.copytree(CHECKOUT / "tests" / "sanity", root / "tests" / "sanity")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "built collection"]):
        run(["git", "-c", "user.name=sanity", "-c", "user.email=sanity@localhost", *argv], root)
    home = MACHINE_CACHE / "ansible-test-home"
    from ansible_test._internal.python_requirements import get_venv_packages

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pip = get_venv_packages(types.SimpleNamespace(version=version))["pip"]
    stand_in = home / ".ansible" / "test" / "cache" / f"get_pip_{pip.replace('.', '_')}.py"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    selected = [arg for test in tests for arg in ("--test", test)]
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stand_in.write_text(GET_PIP)
        return subprocess.run(
            [str(ANSIBLE_BIN / "ansible-test"), "sanity", "--python", version, "--requirements",
             "--color", "no", *selected],
            cwd=root,
            env={**os.environ, "HOME": str(home), "LC_ALL": "C.UTF-8"},
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip


def core_version(controller: Controller) -> str:
    """The ansible-core version a controller runs ('2.16.19')."""
    script = "import ansible.release; print(ansible.release.__version__)"
    done = run([str(controller.bin / "python"), "-c", script], cwd=controller.cwd)
    return done.stdout.strip()


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None):
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done
