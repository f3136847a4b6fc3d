"""The package builds without warnings from its own configuration: `make` installs the checkout
and the hostcheck role builds its wheel from it, so a newcomer's first command shows whatever
setuptools says about it (once: a data folder holding .py files, "Package would be ignored")."""

from __future__ import annotations

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
