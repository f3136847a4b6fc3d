"""The pillow_simd role's verify action on plain data: what the helper's probe read (pip's pins,
the distributions that provide PIL, PIL in a fresh interpreter, the build record, hostcheck's
pillow check) against the validated values, with the messages tests and operators look for;
when the resize benchmark runs, and how a failed read is reported."""

from __future__ import annotations

import copy
import json

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.pillow_simd_rules import (
    benchmark_decision,
    changed_in_this_run,
    read_probe,
    verify_found,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

VERSION = "12.1.1.post0"
VENV = "/opt/venvs/train"
CONSTRAINTS = f"{VENV}/pillow-simd/constraints.txt"
SITE_WIDE = "/etc/xdg/pip/constraints.txt"
IMAGING = f"{VENV}/lib/python3.11/site-packages/PIL/_imaging.cpython-311-x86_64-linux-gnu.so"
KEY = "debian-12-x86_64-cp311-avx2-0123abcd"
NOT_MEASURED = (False, "nothing changed in this run (pillow_simd_benchmark: true runs it)")
WANTED = {
    "venv": VENV,
    "version": VERSION,
    "avx2_build": True,
    "pillow_simd_avx2": "auto",
    "cpu_avx2": True,
    "benchmark": NOT_MEASURED,
}
FOUND = {
    "key": KEY,
    "constraints": {
        "path": CONSTRAINTS,
        "lines": ["# managed", f"pillow=={VERSION}+pillowsimd", f"pillow-simd=={VERSION}"],
    },
    "pip_global": {"files": ["/etc/xdg/pip/pip.conf"], "constraints": [SITE_WIDE]},
    "pip_effective": {
        "rc": 0,
        "config": {
            "global.constraint": f"{SITE_WIDE} {CONSTRAINTS}",
            "install.constraint": f"{SITE_WIDE} {CONSTRAINTS}",
        },
    },
    "claimants": [{"name": "pillow-simd", "version": VERSION, "dir": "..."}],
    "pillow": [{"name": "pillow", "version": f"{VERSION}+pillowsimd"}],
    "placeholder": {"version": f"{VERSION}+pillowsimd", "ok": True},
    "simd_ok": True,
    "imaging": {"path": IMAGING, "sha256": "sha256=abc", "record_sha256": "sha256=abc"},
    "sidecar": {"avx2": True, "avx2_instructions": 4242, "built_on": "node1"},
    "runtime": {
        "ok": True,
        "version": VERSION,
        "imaging": IMAGING,
        "libjpeg_turbo": True,
        "jpeg_version": "8.0",
        "features": {"jpg": True, "zlib": True},
    },
    "hostcheck": {"argv": [f"{VENV}/bin/hostcheck"], "rc": 0, "output": "pass"},
}


def found(**changes) -> dict:
    """FOUND with changes, given as key=value or "key__inner"=value for one level down."""
    data = copy.deepcopy(FOUND)
    for name, value in changes.items():
        outer, _, inner = name.partition("__")
        if inner:
            data[outer][inner] = value
        else:
            data[outer] = value
    return data


def failure(data: dict, **wanted) -> str:
    with pytest.raises(Invalid) as caught:
        verify_found(data, {**WANTED, **wanted})
    return str(caught.value)


def test_a_provisioned_venv_says_what_holds_and_that_nothing_was_measured():
    assert verify_found(FOUND, WANTED) == [
        f"pip in {VENV} reads {CONSTRAINTS}: pillow=={VERSION}+pillowsimd, pillow-simd=={VERSION}",
        f"PIL comes from pillow-simd {VERSION} alone (its _imaging matches the wheel built on "
        f"node1); pillow is the placeholder {VERSION}+pillowsimd",
        f"PIL {VERSION} with libjpeg-turbo (libjpeg API 8.0); resize benchmark not run: nothing "
        "changed in this run (pillow_simd_benchmark: true runs it)",
        "AVX2 build: 4242 AVX2 ymm instructions; CPU avx2 flag: True",
        "hostcheck's pillow check passes",
    ]


def test_measured_it_gives_the_rate_and_the_recount():
    runtime = {**FOUND["runtime"], "resize_per_s": 650.2, "resize_job": "2048x1536 -> 224x224"}
    lines = verify_found(
        found(runtime=runtime, avx2_instructions=4242),
        {**WANTED, "benchmark": (True, "pillow_simd_benchmark is true")},
    )
    assert lines[2] == (
        f"PIL {VERSION} with libjpeg-turbo (libjpeg API 8.0): 650.2 resizes/s "
        "(2048x1536 -> 224x224; pillow_simd_benchmark is true)"
    )
    assert lines[3] == (
        "AVX2 build: 4242 AVX2 ymm instructions (recounted with objdump); CPU avx2 flag: True"
    )
    # a benchmark that measured nothing fails
    with pytest.raises(Invalid, match=r"/bin/python: PIL 12.1.1.post0  \(wanted"):
        verify_found(FOUND, {**WANTED, "benchmark": (True, "asked")})


def test_a_constraint_file_edited_or_not_read_by_pip_fails():
    edited = found(constraints__lines=["# managed", f"pillow-simd=={VERSION}"])
    assert failure(edited) == (
        f"{VENV}: the venv's pip does not pin pillow to the placeholder: constraints.txt has "
        f"['# managed', 'pillow-simd=={VERSION}'] (wanted ['pillow=={VERSION}+pillowsimd', "
        f"'pillow-simd=={VERSION}']), pip config list gives install.constraint='{SITE_WIDE} "
        f"{CONSTRAINTS}' global.constraint='{SITE_WIDE} {CONSTRAINTS}' (wanted {CONSTRAINTS} "
        f"and ['{SITE_WIDE}'])"
    )
    # pip.conf lost the site-wide file, or pip reads no config at all
    only_ours = {"global.constraint": CONSTRAINTS, "install.constraint": CONSTRAINTS}
    lost = found(pip_effective={"rc": 0, "config": only_ours})
    assert "does not pin pillow to the placeholder" in failure(lost)
    assert "install.constraint=''" in failure(found(pip_effective={"rc": 1, "config": {}}))


def test_stock_pillow_over_the_placeholder_fails():
    data = found(
        claimants=[
            {"name": "pillow", "version": "12.3.0", "dir": "..."},
            {"name": "pillow-simd", "version": VERSION, "dir": "..."},
        ],
        pillow=[],
        placeholder__ok=False,
        simd_ok=False,
    )
    message = failure(data)
    assert message.startswith(
        f"{VENV}: PIL should come from pillow-simd {VERSION} alone, built by this role ({KEY}), "
        f"with the placeholder pillow {VERSION}+pillowsimd; found PIL installed by "
        f"['pillow 12.3.0', 'pillow-simd {VERSION}'], pillow [], _imaging "
    )
    # one failure, named once: the other checks still hold
    assert message.count(VENV + ":") == 1


def test_an_imaging_that_no_longer_matches_its_build_fails():
    assert "PIL should come from pillow-simd" in failure(found(simd_ok=False))


def test_pil_that_does_not_import_fails_with_the_error():
    runtime = {"ok": False, "error": "import PIL died with SIGILL"}
    assert failure(found(runtime=runtime)) == (
        f"{VENV}/bin/python: PIL not importable import PIL died with SIGILL (wanted {VERSION} "
        f"with libjpeg-turbo): {runtime}"
    )
    assert "PIL not importable no venv" in failure(found(runtime=None))
    no_turbo = found(runtime={**FOUND["runtime"], "libjpeg_turbo": False})
    assert failure(no_turbo).startswith(f"{VENV}/bin/python: PIL {VERSION}  (wanted")


@pytest.mark.parametrize(
    ("changes", "wanted", "on_disk"),
    [
        ({"sidecar__avx2": False}, {}, "not recounted on disk"),
        ({"sidecar__avx2_instructions": 0}, {}, "not recounted on disk"),
        ({"avx2_instructions": 17}, {}, "17 on disk"),
        ({"avx2_instructions": None, "sidecar__avx2_instructions": 3}, {}, "no objdump here"),
        ({}, {"avx2_build": False, "pillow_simd_avx2": False}, "not recounted on disk"),
    ],
)
def test_an_avx2_choice_other_than_wanted_fails(changes, wanted, on_disk):
    message = failure(found(**changes), **wanted)
    build = "without" if wanted else "with"
    assert message.startswith(
        f"pillow_simd_avx2 {wanted.get('pillow_simd_avx2', 'auto')} wants a build {build} AVX2 "
        "(CPU avx2 flag: True); the installed build has "
    )
    assert on_disk in message


def test_an_sse4_build_where_one_is_wanted_holds():
    data = found(sidecar={"avx2": False, "avx2_instructions": 0, "built_on": "node2"})
    lines = verify_found(data, {**WANTED, "avx2_build": False, "pillow_simd_avx2": False})
    assert lines[3] == "SSE4 (no AVX2) build: 0 AVX2 ymm instructions; CPU avx2 flag: True"


def test_hostcheck_failing_its_pillow_check_fails_and_a_venv_without_it_is_said():
    failed = found(hostcheck={"argv": [], "rc": 1, "output": "pillow FAIL: stock Pillow"})
    assert failure(failed) == (
        f"{VENV}/bin/hostcheck run --check pillow exits 1: pillow FAIL: stock Pillow"
    )
    lines = verify_found(found(hostcheck=None), WANTED)
    assert lines[-1] == f"no hostcheck in {VENV}: its pillow check not run"


def test_every_mismatch_is_named_in_one_message():
    data = found(simd_ok=False, hostcheck={"argv": [], "rc": 2, "output": "usage"})
    message = failure(data)
    assert "PIL should come from pillow-simd" in message
    assert message.endswith("; /opt/venvs/train/bin/hostcheck run --check pillow exits 2: usage")


# ---------------------------------------------------------------- when the benchmark runs


def probe_run(drift: list[str]) -> dict:
    return {"changed": False, "rc": 0, "stdout": json.dumps({"drift": drift, "provisioned": False})}


def test_the_benchmark_runs_when_asked_or_when_this_run_changed_the_venv():
    assert benchmark_decision(True, None) == (True, "pillow_simd_benchmark is true")
    changed = probe_run(["packages not installed: zlib1g-dev"])
    assert benchmark_decision(False, changed) == (
        True,
        "pillow_simd changed this venv in this run",
    )
    assert benchmark_decision(False, probe_run([])) == NOT_MEASURED
    assert benchmark_decision(False, None) == NOT_MEASURED  # verify.yml alone (--tags verify)


@pytest.mark.parametrize(
    "registered",
    [
        {"skipped": True, "changed": False},
        {"failed": True, "stdout": json.dumps({"drift": ["x"]})},
        {"stdout": "not json"},
        {"stdout": "[1, 2]"},
        "a string",
    ],
)
def test_a_probe_that_did_not_run_changed_nothing(registered):
    assert changed_in_this_run(registered) == []


# ---------------------------------------------------------------- reading the host


def test_the_probe_output_is_read_and_its_failures_are_one_line():
    assert read_probe({"rc": 0, "stdout": json.dumps(FOUND)}, VENV, "node1") == FOUND
    helper_failed = {"rc": 1, "stdout": json.dumps({"failed": True, "msg": "python3 cannot run"})}
    with pytest.raises(Invalid) as caught:
        read_probe(helper_failed, VENV, "node1")
    assert str(caught.value) == f"pillow_simd: reading {VENV} on node1 failed: python3 cannot run"
    no_python = {"rc": 127, "stdout": "", "stderr": "", "msg": "[Errno 2] No such file"}
    with pytest.raises(Invalid, match=r"on node1 failed: \[Errno 2\] No such file$"):
        read_probe(no_python, VENV, "node1")
