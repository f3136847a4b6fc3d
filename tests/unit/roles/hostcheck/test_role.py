"""The hostcheck role without hosts: the per-OS vars each OS family gets (RHEL and Ubuntu cannot
run here), the sysctls the host state record watches, the controller's wheel reader, the sandbox
settings against hostcheck's own schema, and defaults that match meta/argument_specs.yml."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import os_vars_for
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from tests.paths import CHECKOUT as REPO
from tests.support.os_vars import loaded

ROLE = REPO / "roles" / "hostcheck"
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
# Per OS: the facts that name it, the vars file the validation must load, the python and one
# package of it.
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


def os_vars(host_facts: dict) -> dict:
    """What the validate action reads for a host with these facts (RoleAction.os_vars), after
    validate.yml's include_vars task loaded its vars file."""
    task_vars = {"__hostcheck_os_vars_loaded": loaded("hostcheck", host_facts)}
    host = SimpleNamespace(facts=lambda: host_facts, ROLE="hostcheck", task_vars=task_vars)
    return os_vars_for(RoleAction.os_vars(host), host_facts)


@pytest.mark.parametrize("name", OSES)
def test_each_os_gets_its_packages_and_python(name):
    names, vars_file, python, package = OSES[name]
    variables = os_vars(facts(*names))
    assert variables == yaml.safe_load((ROLE / "vars" / vars_file).read_text())
    assert variables["__hostcheck_os_python"] == python
    packages = variables["__hostcheck_os_packages"]
    assert package in packages
    # ansible.builtin.pip needs packaging for the interpreter Ansible runs on the host
    assert any(p.endswith("-packaging") for p in packages)
    assert Path(python).name in {p.split("-")[0] for p in packages}


def test_an_os_without_vars_stops_with_a_message():
    with pytest.raises(Invalid) as caught:
        os_vars(facts("SLES", "15", "Suse"))
    assert str(caught.value) == (
        "role hostcheck has no vars for SLES 15 (Suse family): add roles/hostcheck/vars/Suse.yml"
    )


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


def load_wheel_info():
    spec = importlib.util.spec_from_file_location("wheel_info", ROLE / "files" / "wheel_info.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_source(folder: Path) -> Path:
    (folder / "tiny").mkdir(parents=True)
    (folder / "tiny" / "__init__.py").write_text("VALUE = 1\n")
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tiny"\nversion = "1.0"\n[tool.setuptools]\npackages = ["tiny"]\n'
    )
    return folder


def test_a_source_tree_built_before_is_not_built_again(tmp_path, monkeypatch):
    wheel_info = load_wheel_info()
    source, cache = tiny_source(tmp_path / "src"), tmp_path / "cache"
    first = wheel_info.build(source, cache)
    assert first["name"] == "tiny" and Path(first["path"]).is_file()

    def no_build(*args, **kwargs):
        raise AssertionError(f"built again: {args}")

    monkeypatch.setattr(wheel_info.subprocess, "run", no_build)
    (source / "tiny" / "__pycache__").mkdir()  # ignored by the build, so by the digest too
    (source / "tiny" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert wheel_info.build(source, cache) == first
    monkeypatch.undo()

    (source / "tiny" / "__init__.py").write_text("VALUE = 2\n")
    second = wheel_info.build(source, cache)
    assert second["record"] != first["record"] and Path(first["path"]).is_file()
    assert len(list((cache / "sources").iterdir())) == 2


def test_the_tree_digest_follows_content_mode_and_links_not_ignored_folders(tmp_path):
    wheel_info = load_wheel_info()
    source = tiny_source(tmp_path / "src")
    digests = [wheel_info.tree_digest(source)]
    (source / ".cache").mkdir()
    (source / ".cache" / "big").write_text("ignored")
    assert wheel_info.tree_digest(source) == digests[0]
    (source / "tiny" / "__init__.py").chmod(0o755)
    digests.append(wheel_info.tree_digest(source))
    (source / "tiny" / "data").symlink_to("__init__.py")
    digests.append(wheel_info.tree_digest(source))
    (source / "tiny" / "data").unlink()
    (source / "tiny" / "data").symlink_to("elsewhere")
    digests.append(wheel_info.tree_digest(source))
    assert len(set(digests)) == 4


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
    for entry in specs:
        options = specs[entry]["options"]
        assert set(options) == set(defaults)
        assert {k: v["default"] for k, v in options.items()} == defaults
    lines = defaults_text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("hostcheck_"):
            assert lines[number - 1].startswith("#"), f"no comment above {line}"
