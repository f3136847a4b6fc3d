"""The collection built and installed as a user would (tests/integration/collection.py): into an
empty collections path, with only ansible-core, run from a folder with no ansible.cfg of ours.
The OS matrix (test_os_matrix.py) converges its hosts through the same install."""

from __future__ import annotations

import json
import subprocess
import tarfile

import pytest

from tests.integration import collection

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "galaxy.yml",
    "meta/*",
    "requirements.yml",
    "tests/integration/collection.py",
    "tests/sanity/*",
    "playbooks/*",
)

PLAYBOOKS = ["site", "provision", "verify", "audit", "stage_dataset", "repair"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("collection-user")
    return folder, collection.install(folder)


def test_the_tarball_holds_the_collection_and_nothing_of_the_checkout(tmp_path):
    tarball = collection.build(tmp_path)
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        manifest = json.loads(archive.extractfile("MANIFEST.json").read())
    assert manifest["collection_info"]["name"] == "gpu_hosts"
    assert {f"playbooks/{name}.yml" for name in PLAYBOOKS} <= names
    assert {
        "meta/runtime.yml",
        "requirements.yml",
        "LICENSE",
        "plugins/module_utils/sizes.py",
    } <= names
    assert "plugins/modules/nvidia_driver_probe.py" in names
    assert "roles/hostcheck/files/wheel_info.py" in names
    tops = {name.split("/")[0] for name in names}
    assert not tops & {"hostcheck", "tests", "benchmarks", ".cache", ".venv", "pyproject.toml"}
    assert "ansible.cfg" not in names


def test_installed_with_only_ansible_core(installed):
    folder, controller = installed
    listed = subprocess.run(
        [str(controller.bin / "ansible-galaxy"), "collection", "list", "--format", "json"],
        cwd=folder,
        env=controller.environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    found = {name: info["version"] for path in json.loads(listed.stdout).values()
             for name, info in path.items()}  # fmt: skip
    assert found["hostcheck.gpu_hosts"] == collection.GALAXY["version"]
    assert set(collection.requirements()) <= set(found)
    pip = subprocess.run(
        [str(controller.bin / "pip"), "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    packages = {entry["name"].lower() for entry in json.loads(pip.stdout)}
    assert "ansible-core" in packages and "ansible" not in packages
    assert not (folder / "ansible.cfg").exists()


# The sanity tests that need no container; each must have run.
SANITY = [
    "action-plugin-docs", "ansible-doc", "compile", "empty-init", "import", "line-endings",
    "no-assert", "no-illegal-filenames", "no-smart-quotes", "pep8", "pylint", "runtime-metadata",
    "shebang", "symlinks", "use-argspec-type-path", "validate-modules", "yamllint",
]  # fmt: skip


def test_ansible_test_sanity_passes_on_the_built_collection(tmp_path):
    """What every published collection passes: `ansible-test sanity`, on the tarball's files
    (tests/sanity/ignore-<version>.txt says what is skipped, and why)."""
    tarball = collection.build(tmp_path / "dist")
    done = collection.sanity(tarball, tmp_path / "sanity")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-8000:]
    for test in SANITY:
        assert f'Running sanity test "{test}"' in said, test


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_each_playbook_is_reachable_by_its_full_name(installed, playbook):
    folder, controller = installed
    inventory = folder / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu-a01:\n")
    done = subprocess.run(
        [str(controller.bin / "ansible-playbook"), "-i", str(inventory), "--syntax-check",
         f"hostcheck.gpu_hosts.{playbook}"],
        cwd=folder,
        env=controller.environment(),
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ansible_collections/hostcheck/gpu_hosts/playbooks/{playbook}.yml" in done.stdout
