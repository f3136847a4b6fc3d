"""The pillow_simd role's validate action: each bad variable refused by its message, what is at
pillow_simd_venv judged from the host's one read, the AVX2 decision from the CPU flags, why a
host is skipped, and the build inputs (the wheel's cache key as the old tasks computed it)."""

from __future__ import annotations

import hashlib
import subprocess

import jinja2
import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.pillow_simd_rules import (
    HOST_SCRIPT,
    avx2_choice,
    build_values,
    host_values,
    read_host,
    skip_reason,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.paths import CHECKOUT

GOOD = {
    "venv": "/opt/venvs/train",
    "version": "12.1.1.post0",
    "avx2": "auto",
    "wheel_cache": "/root/.cache/hostcheck/pillow-simd-wheels",
    "venv_python": "python3",
    "extra_packages": [],
}


def choice(**changed) -> str:
    return avx2_choice(**{**GOOD, **changed})


@pytest.mark.parametrize(
    ("avx2", "word"), [("auto", "auto"), (True, "true"), ("False", "false"), ("TRUE", "true")]
)
def test_good_values_give_the_avx2_word(avx2, word):
    assert choice(avx2=avx2) == word
    assert choice(venv="/opt/venvs/train/", version="12.1", wheel_cache="") == "auto"
    assert choice(venv="/srv/py@3.11/venv_a+b", version=12, extra_packages=["lcms2-devel"])
    assert choice(version="1.0rc2.post1.dev3", venv_python="/usr/bin/python3.11")


@pytest.mark.parametrize(
    "venv",
    ["opt/venvs/train", "/opt/venvs/my venv", "/opt/venvs/../train", "/opt/./x", "/", "", 5],
)
def test_bad_venvs(venv):
    with pytest.raises(Invalid) as caught:
        choice(venv=venv)
    assert str(caught.value) == (
        "pillow_simd_venv: an absolute path of plain names (letters, digits, . _ + @ -; no . or "
        ".. parts, no blanks: pip.conf lists constraint files separated by blanks), "
        f"got '{venv}'"
    )


@pytest.mark.parametrize("version", [">=12", "latest", "12.1.1-post0", "01.2", "12.*", None])
def test_bad_versions(version):
    with pytest.raises(Invalid) as caught:
        choice(version=version)
    assert str(caught.value) == (
        "pillow_simd_version: one exact release such as 12.1.1.post0 (`pip index versions "
        f"pillow-simd` lists them), not a range or a name, got '{version}'"
    )


@pytest.mark.parametrize("avx2", ["sometimes", 1, None, "yes"])
def test_bad_avx2(avx2):
    with pytest.raises(Invalid, match=rf"^pillow_simd_avx2: auto, true or false, got '{avx2}'$"):
        choice(avx2=avx2)


@pytest.mark.parametrize(
    "changed",
    [
        {"wheel_cache": "relative/wheels"},
        {"wheel_cache": None},
        {"venv_python": "python 3"},
        {"venv_python": ""},
        {"extra_packages": "lcms2-devel"},
        {"extra_packages": ["ok", "-bad"]},
        {"extra_packages": ["with space"]},
        {"extra_packages": [3]},
    ],
)
def test_bad_cache_python_or_packages(changed):
    values = {**GOOD, **changed}
    with pytest.raises(Invalid) as caught:
        avx2_choice(**values)
    assert str(caught.value) == (
        f'pillow_simd_wheel_cache must be "" or an absolute controller path (got '
        f"'{values['wheel_cache']}'), pillow_simd_venv_python a command name or path (got "
        f"'{values['venv_python']}'), pillow_simd_extra_packages a list of package names (got "
        f"{values['extra_packages']})"
    )


def test_the_checks_come_in_the_old_order():
    with pytest.raises(Invalid, match=r"^pillow_simd_venv: "):
        choice(venv="x", version="latest", avx2="maybe")
    with pytest.raises(Invalid, match=r"^pillow_simd_version: "):
        choice(version="latest", avx2="maybe", wheel_cache="x")
    with pytest.raises(Invalid, match=r"^pillow_simd_avx2: "):
        choice(avx2="maybe", wheel_cache="x")


# ---------------------------------------------------------------- what the host has


def host_read(tmp_path, venv: str) -> tuple[str, int, list[str]]:
    """HOST_SCRIPT run here, as the action runs it on the host."""
    cfg = venv.rstrip("/") + "/pyvenv.cfg"
    done = subprocess.run(
        ["sh", "-c", HOST_SCRIPT, "sh", venv, cfg], capture_output=True, text=True, check=True
    )
    return read_host(done.stdout)


def test_the_host_script_tells_what_is_at_the_venv(tmp_path):
    assert host_read(tmp_path, str(tmp_path / "none"))[0] == "missing"
    (tmp_path / "empty").mkdir()
    assert host_read(tmp_path, str(tmp_path / "empty"))[0] == "empty"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / ".hidden").write_text("")
    assert host_read(tmp_path, str(tmp_path / "full"))[0] == "full"
    assert host_read(tmp_path, f"{tmp_path}/full//")[0] == "full"
    (tmp_path / "full" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert host_read(tmp_path, f"{tmp_path}/full/")[0] == "venv"
    (tmp_path / "file").write_text("data")
    assert host_read(tmp_path, str(tmp_path / "file"))[0] == "file"
    (tmp_path / "nowhere").symlink_to(tmp_path / "none")
    assert host_read(tmp_path, str(tmp_path / "nowhere"))[0] == "dangling"
    (tmp_path / "to-a-venv").symlink_to(tmp_path / "full")
    assert host_read(tmp_path, str(tmp_path / "to-a-venv"))[0] == "venv"
    (tmp_path / "to-a-file").symlink_to(tmp_path / "file")
    assert host_read(tmp_path, str(tmp_path / "to-a-file"))[0] == "file"
    # and the CPU flags of this machine, as grep reads them for the old task
    _, rc, flags = host_read(tmp_path, str(tmp_path / "none"))
    with open("/proc/cpuinfo") as cpuinfo:
        line = next((li for li in cpuinfo if li.startswith("flags")), None)
    assert (rc, flags) == ((0, line.split(":", 1)[1].split()) if line else (1, []))


def test_read_host_parses_the_flags_line_and_refuses_garbage():
    out = "venv:missing\ngrep:0\nflags:flags\t\t: fpu sse4_1 avx2\n"
    assert read_host(out) == ("missing", 0, ["fpu", "sse4_1", "avx2"])
    assert read_host("venv:venv\ngrep:1\nflags:\n") == ("venv", 1, [])
    for garbage in ["", "sh: not found", "venv:what\ngrep:0\n", "venv:venv\n"]:
        with pytest.raises(ValueError):
            read_host(garbage)


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (
            "full",
            "a directory with files but no pyvenv.cfg (not a virtual environment); refusing to "
            "create one over it",
        ),
        ("file", "not a directory (a file)"),
        ("dangling", "not a directory (a symlink to nowhere)"),
    ],
)
def test_what_cannot_become_a_venv_is_refused(kind, what):
    with pytest.raises(Invalid) as caught:
        host_values("/opt/venvs/train", "node1", "auto", kind, ["avx2"])
    assert str(caught.value) == f"pillow_simd_venv: /opt/venvs/train on node1 is {what}"


def test_avx2_true_needs_the_flag():
    with pytest.raises(Invalid) as caught:
        host_values("/v", "node2", "true", "venv", ["sse4_1"])
    assert str(caught.value) == (
        "pillow_simd_avx2: true, but /proc/cpuinfo of node2 lists no avx2 flag: a build with "
        "-mavx2 dies with SIGILL on this CPU; set auto or false"
    )


@pytest.mark.parametrize(
    ("avx2", "flags", "build"),
    [
        ("auto", ["sse4_1", "avx2"], True),
        ("auto", ["sse4_1"], False),
        ("auto", [], False),
        ("true", ["avx2"], True),
        ("false", ["avx2"], False),
    ],
)
def test_the_avx2_decision(avx2, flags, build):
    for kind in ("venv", "empty", "missing"):
        assert host_values("/v", "h", avx2, kind, flags) == {
            "cpu_flags": flags,
            "avx2_build": build,
        }


X86 = {"distribution": "Debian", "architecture": "x86_64"}


@pytest.mark.parametrize(
    ("facts", "has_os_vars", "flags", "reason"),
    [
        (X86, True, ["sse4_1", "avx2"], ""),
        (X86, True, ["sse4_1"], ""),
        ({**X86, "distribution": "Gentoo"}, False, ["sse4_1"], "no package list for Gentoo in "
         "roles/pillow_simd/vars"),
        ({**X86, "architecture": "aarch64"}, True, [], "pillow-simd is x86-64 only (its build "
         "passes -msse4); this host is aarch64"),
        (X86, True, ["sse2"], "this CPU has no SSE4.1, which every pillow-simd build needs"),
    ],
)  # fmt: skip
def test_why_a_host_is_skipped(facts, has_os_vars, flags, reason):
    assert skip_reason(facts, has_os_vars, flags) == reason


ROLE = CHECKOUT / "roles" / "pillow_simd"


def test_the_build_inputs_are_those_the_tasks_computed_before():
    os_vars = yaml.safe_load((ROLE / "vars" / "Debian.yml").read_text())
    os_vars["__pillow_simd_os_key"] = "debian-12"
    extra = ["Zlib-Extra", "lcms2-devel"]
    values = build_values(
        "/opt/venvs/train//", 12.1, "python3", "/tmp/../tmp/w", extra, os_vars, True
    )
    # what prepare.yml's set_fact was: sort (case-insensitive), join, hash('sha1')
    old = (
        jinja2.Environment()
        .from_string("{{ (libraries + extra) | sort | join(' ') }}")
        .render(libraries=os_vars["__pillow_simd_library_packages"], extra=extra)
    )
    assert values["packages_hash"] == hashlib.sha1(old.encode()).hexdigest()
    assert values["venv"] == "/opt/venvs/train" and values["version"] == "12.1"
    assert values["cache"] == "/tmp/w"
    assert build_values("/v", "1", "python3", "", [], os_vars, False)["cache"] == ""
    assert values["probe_args"] == [
        "--venv", "/opt/venvs/train", "--venv-python", "python3", "--version", "12.1",
        "--avx2", "yes",
        "--os-key", "debian-12", "--packages-hash", values["packages_hash"],
    ]  # fmt: skip


# ---------------------------------------------------------------- through ansible-playbook
