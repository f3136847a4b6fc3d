"""What `hostcheck run` and `healthcheck` say when root starts them from a venv others can
change (hostcheck/root_runs.py): real files with real owners, made as root."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

import pytest

from hostcheck import root_runs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making files other users own needs root")
NOBODY = 65534


def test_a_root_only_venv_says_nothing(root_only_venv):
    package = root_only_venv / "lib/python3.11/site-packages/hostcheck"
    assert root_runs.warning(str(root_only_venv), str(package)) is None


def test_a_package_a_user_owns_is_said_in_one_line(root_only_venv):
    package = root_only_venv / "lib/python3.11/site-packages/hostcheck"
    os.chown(package / "__init__.py", NOBODY, NOBODY)
    os.chmod(root_only_venv / "bin" / "hostcheck", 0o666)
    said = root_runs.warning(str(root_only_venv), str(package))
    assert said == (
        f"hostcheck: warning: running as root from {root_only_venv}, which others can change: "
        f"{root_only_venv / 'bin' / 'hostcheck'} is writable by everyone (and 1 more); make it "
        f"root's alone (chown -R root:root {root_only_venv}; chmod -R go-w {root_only_venv}) or "
        "run root's checks from a venv only root can write"
    )


def test_an_editable_checkout_is_judged_where_it_was_imported_from(root_only_venv, tmp_path):
    checkout = tmp_path / "src" / "hostcheck"
    checkout.mkdir(parents=True)
    os.chmod(checkout.parent, 0o755)
    os.chown(checkout, NOBODY, NOBODY)
    said = root_runs.warning(str(root_only_venv), str(checkout))
    assert f"{checkout} is owned by nobody" in said


def test_the_command_warns_and_goes_on(tmp_path):
    """`hostcheck list` is not a command root runs on a schedule; `run` is: through a venv
    whose site-packages everyone may write, root's run says so and still runs."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    os.chmod(tmp_path, 0o755)
    site = next((venv / "lib").glob("python3*/site-packages"))
    this_site = sysconfig.get_paths()["purelib"]  # hostcheck and its dependencies, as installed
    (site / "hostcheck_dev.pth").write_text(f"import site; site.addsitedir({this_site!r})\n")
    os.chmod(site / "hostcheck_dev.pth", 0o666)
    python = str(venv / "bin" / "python")
    listed = subprocess.run([python, "-m", "hostcheck", "list"], capture_output=True, text=True)
    assert listed.returncode == 0 and "warning" not in listed.stderr
    ran = subprocess.run(
        [python, "-m", "hostcheck", "run", "--profile", "default", "--host-state"],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    assert f"{site / 'hostcheck_dev.pth'} is writable by everyone" in ran.stderr
    assert ran.stdout.strip(), "the run still printed its host state"
