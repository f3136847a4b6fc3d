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


def test_a_root_only_venv_has_no_problem(root_only_venv):
    venv = root_only_venv
    if root_trust.chain_problems(sys.executable):
        pytest.skip(f"this machine's own Python is not root-only: {sys.executable}")
    assert root_trust.venv_problems(str(venv)) == []


def test_a_file_a_user_owns_is_named(root_only_venv):
    venv = root_only_venv
    pth = venv / "lib/python3.11/site-packages/distutils-precedence.pth"
    os.chown(pth, NOBODY, NOBODY)
    assert f"{pth} is owned by nobody" in root_trust.venv_problems(str(venv))


def test_a_folder_writable_by_a_group_is_named(root_only_venv):
    venv = root_only_venv
    site = venv / "lib/python3.11/site-packages"
    os.chown(site, 0, STAFF_GID)
    os.chmod(site, 0o775)
    problems = root_trust.venv_problems(str(venv))
    assert any(p.startswith(f"{site} is writable by group ") for p in problems), problems
    os.chown(site, 0, 0)  # group root: its members are administrators already
    assert not any(p.startswith(str(site)) for p in root_trust.venv_problems(str(venv)))


def test_writable_by_everyone_is_named_except_a_sticky_folder_above(root_only_venv, tmp_path):
    venv = root_only_venv
    program = venv / "bin" / "hostcheck"
    os.chmod(program, 0o666)
    assert f"{program} is writable by everyone" in root_trust.venv_problems(str(venv))
    os.chmod(program, 0o755)
    os.chmod(venv.parent, 0o1777)  # like /tmp: others cannot replace what root owns in it
    assert not any(str(venv.parent) in p for p in root_trust.chain_problems(str(venv)))
    assert root_trust.chain_problems(str(venv.parent)) == [f"{venv.parent} is writable by everyone"]


def test_a_link_is_followed_to_its_target(root_only_venv, tmp_path):
    venv = root_only_venv
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


def test_the_quick_check_sees_what_every_start_runs_and_the_package(root_only_venv):
    venv = root_only_venv
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


def test_a_venv_not_made_yet_is_judged_by_the_folder_above_it(tmp_path):
    os.chmod(tmp_path, 0o755)
    shared = tmp_path / "venvs"
    shared.mkdir()
    os.chown(shared, 0, STAFF_GID)
    os.chmod(shared, 0o775)
    program = shared / "train" / "bin" / "hostcheck"
    problems = root_trust.program_problems(str(program), str(shared / "train"))
    assert problems == [f"{shared} is writable by group staff"]
    os.chmod(shared, 0o755)
    assert root_trust.program_problems(str(program), str(shared / "train")) == []


def test_a_program_in_a_venv_is_walked_with_its_venv(root_only_venv):
    (root_only_venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = root_only_venv / "lib/python3.11/site-packages"
    (site / "torch").mkdir()
    os.chown(site / "torch", NOBODY, NOBODY)
    program = str(root_only_venv / "bin" / "hostcheck")
    assert root_trust.program_problems(program) == [f"{site / 'torch'} is owned by nobody"]


def test_a_program_outside_a_venv_brings_its_interpreter(tmp_path):
    os.chmod(tmp_path, 0o755)
    interpreter = tmp_path / "python3"
    interpreter.write_text("")
    os.chown(interpreter, NOBODY, NOBODY)
    program = tmp_path / "hostcheck"
    program.write_text(f"#!{interpreter} -s\nimport hostcheck\n")
    assert root_trust.program_problems(str(program)) == [f"{interpreter} is owned by nobody"]
