"""The cuda_check role's one action (plugins/action/cuda_check_verify.py) on plain data and on
this machine: the facts script fed on stdin to the venv's python or, without one, the OS's
python3 (the wrapper it runs on the host, run here for real), the folders it is given, and the
verdict or failure the decision becomes; the messages are those operators look for."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import (
    RUN_SCRIPT,
    cuda_check_facts,
    decided,
    os_paths,
    parse_read,
    script_args,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.paths import CHECKOUT
from tests.support.cuda_check import SCRIPT, facts, settings

ROLE = CHECKOUT / "roles" / "cuda_check"


def run_wrapper(python: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """RUN_SCRIPT as the action runs it on the host: the facts script on stdin."""
    return subprocess.run(
        ["/bin/sh", "-c", RUN_SCRIPT, "sh", python, *args],
        input=SCRIPT.read_text(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )


def test_the_venvs_python_reads_when_there_is_one(tmp_path):
    done = run_wrapper(sys.executable, f"--toolkit-path={tmp_path}")
    assert done.returncode == 0, done.stderr
    by_venv, reading = parse_read(done.stdout)
    found = cuda_check_facts(reading)  # as the action takes it
    assert by_venv is True
    assert found["python"] == sys.executable
    assert found["toolkits"] == []
    assert set(found) >= {"nvml", "kernel_module", "pci_gpus", "cudnn", "torch"}


def test_without_a_venv_python_the_os_python3_reads(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)
    done = run_wrapper(
        str(tmp_path / "venv" / "bin" / "python"), env={"PATH": f"{tmp_path}/bin:/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr
    by_venv, found = parse_read(done.stdout)
    assert by_venv is False
    assert found["python"] == str(tmp_path / "bin" / "python3")


def test_what_an_import_prints_before_the_json_is_passed_over():
    assert parse_read('venv\nsome import says hello\n{"python": "/v/bin/python"}\n') == (
        True,
        {"python": "/v/bin/python"},
    )


def test_the_folders_given_or_the_oss_usual_ones():
    os_vars = {"__cuda_check_os_cudnn_library_paths": ["/usr/lib/{architecture}-linux-gnu"]}
    key = "__cuda_check_os_cudnn_library_paths"
    assert os_paths([], os_vars, key, {"architecture": "aarch64"}) == ["/usr/lib/aarch64-linux-gnu"]
    assert os_paths(["/opt/cudnn/lib"], os_vars, key, {"architecture": "x86_64"}) == [
        "/opt/cudnn/lib"
    ]
    assert script_args(["/usr/local"], ["/usr/include"], ["/usr/lib64"]) == [
        "--toolkit-path=/usr/local",
        "--cudnn-include-path=/usr/include",
        "--cudnn-library-path=/usr/lib64",
    ]


@pytest.mark.parametrize("os_file", ["Debian.yml", "RedHat.yml"])
def test_every_os_path_fills_in_with_the_facts(os_file):
    import yaml

    os_vars = yaml.safe_load((ROLE / "vars" / os_file).read_text())
    for key, paths in os_vars.items():
        for path in os_paths([], os_vars, key, {"architecture": "x86_64"}):
            assert path.startswith("/") and "{" not in path, (key, paths)


def test_a_pass_and_a_skip_become_the_verdict_with_the_versions():
    verdict, versions = decided(facts(), settings())
    assert verdict.startswith("pass: driver ")
    assert versions[0] == f"cuda_check: {verdict}"
    verdict, versions = decided(facts(driver=None), settings())
    assert verdict.startswith("skip: no NVIDIA driver (NVML: ")
    assert verdict.endswith(" (cuda_check_without_driver: skip)")
    assert versions[1].startswith("NVIDIA driver       none")


def test_a_failure_is_the_whole_message():
    with pytest.raises(Invalid) as failed:
        decided(facts(driver=None), settings(without_driver="fail"))
    lines = str(failed.value).split("\n")
    assert lines[0].startswith("cuda_check: fail: no NVIDIA driver")
    assert lines[-1].startswith("problem: cuda_check_without_driver: fail: no NVIDIA driver")
