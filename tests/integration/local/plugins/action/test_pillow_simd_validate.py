"""The pillow_simd role's validate action through ansible-playbook on this machine."""

from __future__ import annotations

from tests.support.role_validation import validate


def test_the_action_reads_this_machine_once(tmp_path):
    venv = tmp_path / "venv"
    first, again = validate("pillow_simd", {"pillow_simd_venv": f"{venv}/"}, tmp_path)
    assert not first.get("failed"), first
    values = first["values"]
    assert values["avx2_build"] is ("avx2" in values["cpu_flags"])
    assert values["benchmark"] is False and values["skip_reason"] == ""  # x86-64 with SSE4.1
    assert (values["venv"], values["version"]) == (str(venv), "12.1.1.post0")
    # this machine is Debian: vars/Debian.yml, its cache key templated with the facts
    assert values["os_vars"]["__pillow_simd_library_packages"][0] == "libjpeg62-turbo-dev"
    assert values["os_vars"]["__pillow_simd_os_key"].startswith("debian-")
    assert "{{" not in values["os_vars"]["__pillow_simd_os_key"]
    assert values["probe_args"][:2] == ["--venv", str(venv)]
    assert (
        again["values"] == values and again["msg"] == "pillow_simd: validated earlier in this run"
    )


def test_a_bad_benchmark_fails_the_action(tmp_path):
    (failed,) = validate("pillow_simd", {"pillow_simd_benchmark": "often"}, tmp_path)
    assert failed["msg"].startswith("pillow_simd: validation of arguments failed: argument ")
    assert "'pillow_simd_benchmark'" in failed["msg"] and "'often'" in failed["msg"]


def test_the_action_refuses_a_directory_that_is_no_venv(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x").write_text("")
    (failed,) = validate("pillow_simd", {"pillow_simd_venv": f"{tmp_path}/data"}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"] == (
        f"pillow_simd_venv: {tmp_path}/data on localhost is a directory with files but no "
        "pyvenv.cfg (not a virtual environment); refusing to create one over it"
    )


def test_switched_off_the_host_is_not_read_but_the_variables_are(tmp_path):
    off = {"pillow_simd_enabled": False, "pillow_simd_venv": f"{tmp_path}/x"}
    first, _ = validate("pillow_simd", off, tmp_path)
    assert first["values"] == {} and "ansible_facts" not in first
    (failed,) = validate("pillow_simd", {**off, "pillow_simd_avx2": "sometimes"}, tmp_path)
    assert failed["msg"] == "pillow_simd_avx2: auto, true or false, got 'sometimes'"
