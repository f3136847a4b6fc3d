"""The hostcheck role without hosts: the per-OS vars each OS family gets (RHEL and Ubuntu cannot
run here), the controller's wheel reader, the sandbox settings against hostcheck's own schema,
and defaults that match meta/argument_specs.yml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from hostcheck.config import load_profile
from hostcheck.registry import profile_schema

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "hostcheck"
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
    "ANSIBLE_STDOUT_CALLBACK": "json",
    "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
    "PATH": f"{BIN}:{os.environ['PATH']}",
}
# The role's vars entry point for each OS, as gathered facts would name it.
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Load the per-OS vars
      ansible.builtin.include_role:
        name: hostcheck
        tasks_from: vars
      vars:
        ansible_facts: "{{ item }}"
      loop: %s
"""
OSES = {
    "Debian 12": (("Debian", "12", "Debian"), "Debian.yml", "/usr/bin/python3", "python3-venv"),
    "Ubuntu 22": (("Ubuntu", "22", "Debian"), "Debian.yml", "/usr/bin/python3", "python3-venv"),
    "Ubuntu 24": (("Ubuntu", "24", "Debian"), "Debian.yml", "/usr/bin/python3", "python3-venv"),
    "RHEL 8": (("RedHat", "8", "RedHat"), "RedHat-8.yml", "/usr/bin/python3.11", "python3.11"),
    "Rocky 8": (("Rocky", "8", "RedHat"), "RedHat-8.yml", "/usr/bin/python3.11", "python3.11"),
    "RHEL 9": (("RedHat", "9", "RedHat"), "RedHat.yml", "/usr/bin/python3", "python3"),
    "Rocky 9": (("Rocky", "9", "RedHat"), "RedHat.yml", "/usr/bin/python3", "python3"),
    "Alma 9": (("AlmaLinux", "9", "RedHat"), "RedHat.yml", "/usr/bin/python3", "python3"),
}


def facts(distribution: str, major: str, family: str) -> dict:
    return {
        "distribution": distribution,
        "distribution_major_version": major,
        "os_family": family,
    }


def play(tmp_path: Path, cases: list[dict]) -> tuple[int, list[dict]]:
    book = tmp_path / "vars.yml"
    book.write_text(PLAYBOOK % json.dumps(cases))
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book)],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    output = json.loads(done.stdout[done.stdout.index("{") :])
    results = [
        task["hosts"]["localhost"]
        for task in output["plays"][0]["tasks"]
        if task["task"]["name"].startswith("hostcheck : ")
    ]
    return done.returncode, results


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> dict[str, tuple[list[str], dict, str]]:
    """Per OS: the vars file include_vars read, its variables, the python chosen for the venv."""
    cases = [facts(*spec[0]) for spec in OSES.values()]
    code, results = play(tmp_path_factory.mktemp("osvars"), cases)
    assert code == 0, results
    per_os = [results[i : i + 3] for i in range(0, len(results), 3)]
    return {
        name: (
            included["ansible_included_var_files"],
            included["ansible_facts"],
            chosen["ansible_facts"]["__hostcheck_python"],
        )
        for name, (included, _, chosen) in zip(OSES, per_os)
    }


@pytest.mark.parametrize("name", OSES)
def test_each_os_gets_its_packages_and_python(loaded, name):
    _, vars_file, python, package = OSES[name]
    files, variables, chosen = loaded[name]
    assert [Path(f).name for f in files] == [vars_file]
    assert chosen == variables["__hostcheck_os_python"] == python
    packages = variables["__hostcheck_os_packages"]
    assert package in packages
    # ansible.builtin.pip needs packaging for the interpreter Ansible runs on the host
    assert any(p.endswith("-packaging") for p in packages)
    assert Path(python).name in {p.split("-")[0] for p in packages}


def test_an_os_without_vars_stops_with_a_message(tmp_path):
    code, results = play(tmp_path, [facts("SLES", "15", "Suse")])
    assert code != 0
    assert "role hostcheck has no vars for SLES 15 (Suse family)" in results[-1]["msg"]


def wheel_info(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROLE / "files" / "wheel_info.py"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_wheel_info_reads_version_and_hashed_record_lines(tmp_path):
    wheel = tmp_path / "hostcheck-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("hostcheck/__init__.py", "")
        archive.writestr(
            "hostcheck-1.2.3.dist-info/METADATA",
            "Metadata-Version: 2.4\nName: hostcheck\nVersion: 1.2.3\n\nlong text\n",
        )
        archive.writestr(
            "hostcheck-1.2.3.dist-info/RECORD",
            "hostcheck/__init__.py,sha256=47DEQpj8HBSa,0\n"
            "hostcheck-1.2.3.dist-info/METADATA,sha256=abc,60\n"
            "hostcheck-1.2.3.dist-info/RECORD,,\n",
        )
    done = wheel_info("inspect", str(wheel))
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["name"] == "hostcheck" and info["version"] == "1.2.3"
    assert info["filename"] == wheel.name and info["path"] == str(wheel)
    assert info["record"] == [
        "hostcheck-1.2.3.dist-info/METADATA,sha256=abc,60",
        "hostcheck/__init__.py,sha256=47DEQpj8HBSa,0",
    ]


def test_wheel_info_errors_are_one_line(tmp_path):
    (tmp_path / "broken.whl").write_text("not a zip")
    done = wheel_info("inspect", str(tmp_path / "broken.whl"))
    assert done.returncode == 1 and "cannot read the wheel" in done.stderr
    done = wheel_info("build", str(tmp_path), str(tmp_path / "cache"))
    assert done.returncode == 1 and f"{tmp_path}: no pyproject.toml here" in done.stderr


def test_sandbox_settings_pin_torch_and_pass_hostcheck_schema(tmp_path):
    path = REPO / "inventory" / "sandbox_group_vars" / "all" / "hostcheck.yml"
    settings = yaml.safe_load(path.read_text())
    assert settings["hostcheck_pip_packages_before"] == ["torch==2.13.0"]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(settings["hostcheck_config"]))
    profile = load_profile(settings["hostcheck_profile"], profile_schema(), [str(config)], [])
    assert profile.section("ulimits")["min_nofile_hard"] == 20000


def test_defaults_match_the_argument_specs_and_are_commented():
    defaults_text = (ROLE / "defaults" / "main.yml").read_text()
    defaults = yaml.safe_load(defaults_text)
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    for entry in ("main", "validate"):
        options = specs[entry]["options"]
        assert set(options) == set(defaults)
        assert {k: v["default"] for k, v in options.items()} == defaults
    lines = defaults_text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("hostcheck_"):
            assert lines[number - 1].startswith("#"), f"no comment above {line}"
