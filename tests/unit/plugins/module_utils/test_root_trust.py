"""Whether someone other than root can change what root runs (plugins/module_utils/
root_trust.py, the package's hostcheck._shared.root_trust): real files with real owners and
modes, made as root in a test folder."""

from __future__ import annotations

import os
import sys

import pytest

from hostcheck._shared import root_trust

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making files other users own needs root")
NOBODY = 65534
STAFF_GID = 50  # Debian's group "staff"


@pytest.fixture
def venv(tmp_path):
    """A root-owned venv-like tree under a root-owned folder, writable by root only."""
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


def test_a_root_only_venv_has_no_problem(venv):
    if root_trust.chain_problems(sys.executable):
        pytest.skip(f"this machine's own Python is not root-only: {sys.executable}")
    assert root_trust.venv_problems(str(venv)) == []


def test_a_file_a_user_owns_is_named(venv):
    pth = venv / "lib/python3.11/site-packages/distutils-precedence.pth"
    os.chown(pth, NOBODY, NOBODY)
    assert f"{pth} is owned by nobody" in root_trust.venv_problems(str(venv))


def test_a_folder_writable_by_a_group_is_named(venv):
    site = venv / "lib/python3.11/site-packages"
    os.chown(site, 0, STAFF_GID)
    os.chmod(site, 0o775)
    problems = root_trust.venv_problems(str(venv))
    assert any(p.startswith(f"{site} is writable by group ") for p in problems), problems
    os.chown(site, 0, 0)  # group root: its members are administrators already
    assert not any(p.startswith(str(site)) for p in root_trust.venv_problems(str(venv)))


def test_writable_by_everyone_is_named_except_a_sticky_folder_above(venv, tmp_path):
    program = venv / "bin" / "hostcheck"
    os.chmod(program, 0o666)
    assert f"{program} is writable by everyone" in root_trust.venv_problems(str(venv))
    os.chmod(program, 0o755)
    os.chmod(venv.parent, 0o1777)  # like /tmp: others cannot replace what root owns in it
    assert not any(str(venv.parent) in p for p in root_trust.chain_problems(str(venv)))
    assert root_trust.chain_problems(str(venv.parent)) == [f"{venv.parent} is writable by everyone"]


def test_a_link_is_followed_to_its_target(venv, tmp_path):
    elsewhere = tmp_path / "home" / "alice" / "python"
    elsewhere.mkdir(parents=True)
    os.chown(elsewhere.parent, NOBODY, NOBODY)
    interpreter = elsewhere / "python3"
    interpreter.write_text("")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(interpreter)
    problems = root_trust.chain_problems(str(venv / "bin" / "python"))
    assert problems == [f"{elsewhere.parent} is owned by nobody"]


def test_a_missing_path_is_named(tmp_path):
    assert root_trust.chain_problems(str(tmp_path / "nothing")) == [
        f"{tmp_path / 'nothing'} does not exist"
    ]


def test_the_quick_check_sees_what_every_start_runs_and_the_package(venv):
    site = venv / "lib/python3.11/site-packages"
    (site / "torch").mkdir()
    os.chown(site / "torch", NOBODY, NOBODY)  # another package: only the full walk sees it
    os.chmod(site / "distutils-precedence.pth", 0o666)
    os.chown(site / "hostcheck" / "__init__.py", NOBODY, NOBODY)
    quick = root_trust.startup_problems(str(venv))
    assert f"{site / 'distutils-precedence.pth'} is writable by everyone" in quick
    assert f"{site / 'hostcheck' / '__init__.py'} is owned by nobody" in quick
    assert not any("torch" in p for p in quick)
    assert f"{site / 'torch'} is owned by nobody" in root_trust.venv_problems(str(venv))
