"""The package builds without warnings from its own configuration: `make` installs the checkout
and the hostcheck role builds its wheel from it, so a newcomer's first command shows whatever
setuptools says about it (once: a data folder holding .py files, "Package would be ignored")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile

from tests.paths import CHECKOUT


def test_the_wheel_builds_without_warnings_and_keeps_the_job_probe(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(CHECKOUT),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert not re.search(r"warning", said, re.IGNORECASE), said[-3000:]
    (wheel,) = tmp_path.glob("hostcheck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # what `hostcheck job` puts on the training job's PYTHONPATH
    assert "hostcheck/job/inject/sitecustomize.py" in names
    assert "hostcheck/job/inject/_hostcheck_job_probe.py" in names


def test_the_editable_install_of_make_prints_no_warning(tmp_path):
    """make's venv installs the checkout editable, setuptools in pip's isolated build as on a
    fresh machine; the Makefile silences setuptools' notice that the package is a folder of the
    working directory (EDITABLE_QUIET), and nothing else may warn."""
    makefile = (CHECKOUT / "Makefile").read_text()
    quiet = re.search(r'^EDITABLE_QUIET = PYTHONWARNINGS="([^"]+)"$', makefile, re.MULTILINE)
    assert quiet, "the Makefile has no EDITABLE_QUIET"
    # into a venv of its own (pip --python): installing it anywhere from this venv's pip would
    # first uninstall this venv's own editable hostcheck
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv"], check=True)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(tmp_path / "venv" / "bin" / "python")),
            *("install", "--quiet", "--no-deps", "--no-compile", "-e", str(CHECKOUT)),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONWARNINGS": quiet.group(1)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # this machine's pip configuration names index folders that may not exist: not ours
    said = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and not re.match(r"WARNING: Location '[^']*' is ignored", line)
    ]
    assert said == [], "\n".join(said[-40:])
