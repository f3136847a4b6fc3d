"""hostcheck on a controller: `pip install .` with no extras into a clean venv gives a working
`hostcheck fleet` and `hostcheck list` with no torch or nvidia-ml-py installed, and `hostcheck
run` there says which checks skip for want of them (the node extra the hostcheck role installs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.integration.ansible import CHECKOUT

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "hostcheck/*",
    "plugins/module_utils/*",
)


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    folder = tmp_path_factory.mktemp("controller")
    source = folder / "src"  # a copy: building never writes into the checkout
    shutil.copytree(CHECKOUT, source, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "*.egg-info",
                                                  "build", "reports"))  # fmt: skip
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, venv / "bin"


def hostcheck(bin_dir, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_dir / "hostcheck"), *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_no_torch_and_no_nvml_are_installed(controller):
    _, bin_dir = controller
    listed = subprocess.run(
        [str(bin_dir / "pip"), "list", "--format", "json"], capture_output=True, text=True
    )
    names = {entry["name"].lower() for entry in json.loads(listed.stdout)}
    assert "hostcheck" in names
    assert not names & {"torch", "nvidia-ml-py", "ansible", "ansible-core"}


def test_fleet_and_list_work_without_them(controller):
    folder, bin_dir = controller
    audit = folder / "reports" / "20261124T120000Z"
    audit.mkdir(parents=True)
    quick = hostcheck(bin_dir, "run", "--profile", "quick", "--report", f"json:{audit}/a.json")
    assert quick.returncode in (0, 1), quick.stderr
    report = json.loads((audit / "a.json").read_text())
    report["host"]["hostname"] = "b"
    (audit / "b.json").write_text(json.dumps(report))
    fleet = hostcheck(bin_dir, "fleet", "--format", "json", str(audit))
    assert fleet.returncode in (0, 1), fleet.stderr
    assert sorted(host["host"] for host in json.loads(fleet.stdout)["hosts"]) == ["a", "b"]
    listed = hostcheck(bin_dir, "list")
    assert listed.returncode == 0 and "loop" in listed.stdout


def test_run_says_which_checks_skip_and_why(controller):
    folder, bin_dir = controller
    out = folder / "default.json"
    done = hostcheck(bin_dir, "run", "--report", f"json:{out}")
    assert done.returncode in (0, 1), done.stderr
    checks = {check["id"]: check for check in json.loads(out.read_text())["checks"]}
    assert checks["loop"]["status"] == "skip"
    assert "torch is not installed" in checks["loop"]["summary"]
    assert "hostcheck[node]" in checks["loop"]["summary"]
    assert checks["gpu"]["status"] == "skip"
    assert "hostcheck[node]" in json.dumps(checks["gpu"])
