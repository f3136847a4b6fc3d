"""The dcgm check: `dcgmi diag -r 1 -j`'s verdict, in each shape DCGM 3.0 to 4.x writes it.

Only a recorded output of a real dcgmi can test the parser for sure: none can be had here (no
NVIDIA GPU, no NVIDIA repository). The outputs in dcgm_outputs/ are reconstructed by hand from
the format DCGM's source writes (dcgm_outputs/README.md); every test below reads one of them, or
a variation of one, through canned command output or a fake `dcgmi` executable.
"""

import json
import stat
from pathlib import Path

import pytest

from hostcheck.checks import dcgm, gpu
from hostcheck.checks.base import CheckContext
from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from hostcheck.health.verdict import UNHEALTHY, decide
from hostcheck.model import Status
from hostcheck.registry import CHECKS
from hostcheck.report.writers import _problems
from hostcheck.reuse import MEASURING, settings_profile
from hostcheck.system import System

OUTPUTS = Path(__file__).parent / "dcgm_outputs"
ARGV = ("dcgmi", "diag", "-r", "1", "-j")
CONFIG = {"command": "dcgmi", "level": 1, "timeout_seconds": 120}


def output(name: str) -> str:
    return (OUTPUTS / name).read_text()


def run(fake_host, stdout: str, rc: int = 0, stderr: str = "", **changes):
    fake_host.command(ARGV, stdout, rc, stderr)
    return dcgm.run(fake_host.context({**CONFIG, **changes}))


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def names(result):
    return [f.name for f in result.findings]


# ---------------------------------------------------------------- DCGM 4.x


def test_4x_pass_says_how_many_tests_on_how_many_gpus(fake_host):
    result = run(fake_host, output("4x_pass.json"))
    assert result.status == Status.PASS
    assert result.summary == (
        "dcgmi diag -r 1: 1 test passed on 2 GPUs (DCGM 4.2.3, driver 550.54.15)"
    )
    assert names(result) == ["diag"]
    assert result.remedy == ""
    assert result.data["version"] == "4.2.3"
    assert result.data["driver"] == "550.54.15"
    assert result.data["exit_code"] == 0
    assert [(r["entity"], r["test"], r["status"]) for r in result.data["results"]] == [
        ("gpu0", "software", "pass"),
        ("gpu1", "software", "pass"),
    ]


def test_4x_persistence_warning_fails_gpu1_with_dcgm_s_message_and_the_driver_role(fake_host):
    # dcgmi may print a line before its JSON
    stdout = "Successfully ran diagnostic for group.\n" + output("4x_fail_persistence.json")
    result = run(fake_host, stdout, rc=dcgm.EXIT_TEST_FAILED)
    assert result.status == Status.FAIL
    assert names(result) == ["gpu1 persistence mode"]
    failed = finding(result, "gpu1 persistence mode")
    assert failed.status == Status.FAIL
    assert failed.display.startswith(
        "Persistence Mode: Persistence mode for GPU 1 is disabled. Enable persistence mode by"
    )
    assert failed.measured == {"status": "fail", "error_ids": [28]}
    assert failed.expected == "pass"
    assert failed.remedy == gpu.PERSISTENCE_FIX
    assert "nvidia_driver_persistenced: true (role nvidia_driver)" in result.remedy
    assert failed.source == "dcgmi diag -r 1 -j"


# ---------------------------------------------------------------- DCGM 3.x


def test_339_one_test_per_sub_check_fails_each_gpu_apart(fake_host):
    result = run(fake_host, output("339_fail.json"), rc=dcgm.EXIT_TEST_FAILED)
    assert result.status == Status.FAIL
    assert names(result) == ["gpu1 persistence mode", "gpu0 row remap"]
    assert finding(result, "gpu1 persistence mode").display.startswith(
        "Persistence mode for GPU 1 is disabled."
    )
    remap = finding(result, "gpu0 row remap")
    assert remap.display.startswith("GPU 0 had uncorrectable memory errors and row remapping")
    assert remap.remedy == (
        "not fixable by a role variable: drain the node; once its jobs end, reset the GPU "
        "(nvidia-smi -r -i <bus id>)"
    )
    assert remap.measured == {"status": "fail", "error_ids": [92]}
    assert result.data["version"] == "3.3.9"
    assert result.data["driver"] == "535.183.01"
    inforom = [r for r in result.data["results"] if r["test"] == "inforom"]
    assert {r["status"] for r in inforom} == {"skip"}


def test_339_with_every_test_passing_counts_the_sub_checks_and_names_the_skipped(fake_host):
    document = json.loads(output("339_fail.json"))
    for test in document["DCGM GPU Diagnostic"]["test_categories"][0]["tests"]:
        for item in test["results"]:
            if item["status"] == "Fail":
                item["status"] = "Pass"
                del item["warnings"]
    result = run(fake_host, json.dumps(document))
    assert result.status == Status.PASS
    assert result.summary == (
        "dcgmi diag -r 1: 8 tests passed on 2 GPUs, 1 skipped (inforom) "
        "(DCGM 3.3.9, driver 535.183.01)"
    )


def test_30_to_32_string_warnings_and_gpu_ids_as_text(fake_host):
    result = run(fake_host, output("32_string_warnings.json"), rc=dcgm.EXIT_TEST_FAILED)
    assert result.status == Status.FAIL
    assert names(result) == [
        "gpu0 persistence mode",
        "gpu0 environment variables",
        "gpu1 environment variables",
    ]
    env = finding(result, "gpu1 environment variables")
    assert env.display == (
        "Found CUDA performance-limiting environment variable 'CUDA_LAUNCH_BLOCKING'."
    )
    assert "unset the variable the message names" in env.remedy
    assert finding(result, "gpu0 persistence mode").measured == {"status": "fail", "error_ids": []}
    assert result.data["version"] == "3.1.8"
    assert result.data["driver"] is None


def test_331_status_in_the_first_result_only_applies_to_every_item(fake_host):
    result = run(fake_host, output("331_status_first.json"), rc=dcgm.EXIT_TEST_FAILED)
    assert result.status == Status.FAIL
    assert names(result) == ["denylist"]  # 3.3.1 names no GPU
    denied = finding(result, "denylist")
    assert denied.display == (
        "Found the denylisted driver: nouveau; Found the denylisted driver: nvidiafb"
    )
    assert denied.measured == {"status": "fail", "error_ids": [47]}
    assert "nvidia_driver_blacklist_nouveau: true (role nvidia_driver)" in denied.remedy


def test_not_run_is_a_skip_and_an_unknown_status_warns(fake_host):
    document = json.loads(output("4x_pass.json"))
    results = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]
    results[0]["status"] = "Not Run"
    results[1]["status"] = "Maybe"
    result = run(fake_host, json.dumps(document))
    assert result.status == Status.WARN
    odd = finding(result, "gpu1 software")
    assert odd.display == "status 'Maybe' not understood"
    assert odd.remedy == "see dcgmi diag -r 1 on the host"
    assert result.data["results"][0]["status"] == "skip"


# ---------------------------------------------------------------- exit codes and errors


def test_exit_205_says_the_gpu_must_be_isolated_and_replaced(fake_host):
    result = run(fake_host, output("339_fail.json"), rc=dcgm.EXIT_ISOLATE)
    assert result.status == Status.FAIL
    remap = finding(result, "gpu0 row remap")
    assert remap.display.endswith("; DCGM asks for the GPU to be isolated (dcgmi exit 205)")
    assert remap.remedy == (
        "not fixable by a role variable: drain the node and replace the GPU (open a hardware "
        "ticket with the bus id and the serial number)"
    )
    # a failure a role variable fixes is not what asks for the isolation
    persistence = finding(result, "gpu1 persistence mode")
    assert "isolated" not in persistence.display
    assert persistence.remedy == gpu.PERSISTENCE_FIX
    assert names(result) == ["gpu1 persistence mode", "gpu0 row remap"]


def test_exit_205_with_only_role_fixable_failures_adds_the_isolation_apart(fake_host):
    result = run(fake_host, output("4x_fail_persistence.json"), rc=dcgm.EXIT_ISOLATE)
    assert names(result) == ["gpu1 persistence mode", "diag"]
    isolated = finding(result, "diag")
    assert isolated.status == Status.FAIL
    assert isolated.display == (
        "DCGM asks for the GPU to be isolated (dcgmi exit 205), without saying which failure "
        "asks for it"
    )
    assert isolated.remedy == dcgm.ISOLATE_FIX


def test_exit_205_or_226_without_a_failing_result_still_fails(fake_host):
    isolated = run(fake_host, output("4x_pass.json"), rc=dcgm.EXIT_ISOLATE)
    assert isolated.status == Status.FAIL
    assert finding(isolated, "diag").display == (
        "DCGM asks for the GPU to be isolated (dcgmi exit 205), but its JSON names no failing test"
    )
    assert "replace the GPU" in isolated.remedy
    failed = run(fake_host, output("4x_pass.json"), rc=dcgm.EXIT_TEST_FAILED)
    assert failed.status == Status.FAIL
    assert finding(failed, "diag").display == (
        "a test failed (dcgmi exit 226), but its JSON names no failing test"
    )
    assert failed.remedy == "see dcgmi diag -r 1 on the host"


def test_a_fail_is_a_fail_whatever_the_exit_code(fake_host):
    result = run(fake_host, output("4x_fail_persistence.json"), rc=0)
    assert result.status == Status.FAIL
    assert names(result) == ["gpu1 persistence mode"]


def test_runtime_error_is_an_error_with_its_text(fake_host):
    result = run(fake_host, output("runtime_error.json"), rc=1)
    assert result.status == Status.ERROR
    assert result.summary == (
        "dcgmi diag -r 1 could not run: Error: the diagnostic could not start: nvvs is "
        "missing from /usr/libexec/datacenter-gpu-manager-4"
    )
    assert result.data["version"] == "4.2.3"
    assert result.data["results"] == []


def test_no_host_engine_is_an_error_that_says_to_start_it(fake_host):
    result = run(
        fake_host,
        "",
        rc=255,
        stderr="Error: unable to establish a connection to the specified host: localhost\n"
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
    )
    assert result.status == Status.ERROR
    assert finding(result, "diag").display == (
        "dcgmi exited 255: Error: Unable to connect to host engine. Host engine connection "
        "invalid/disconnected."
    )
    assert "systemctl enable --now nvidia-dcgm" in result.remedy


def test_a_non_zero_exit_with_all_tests_passing_is_an_error(fake_host):
    result = run(fake_host, output("4x_pass.json"), rc=3, stderr="something odd\n")
    assert result.status == Status.ERROR
    assert finding(result, "diag").display == "dcgmi exited 3: something odd"


@pytest.mark.parametrize(
    ("stdout", "said"),
    [
        ("Segmentation fault\n", "no JSON object in dcgmi's output"),
        ('{"DCGM Diagnostic": {"test_categories": [', "no JSON object in dcgmi's output"),
        ('junk {"a": 1,} junk', "dcgmi's output is not valid JSON (Expecting property name"),
        ('{"Something Else": {}}', "no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' key (keys: "),
        ('{"DCGM Diagnostic": []}', "'DCGM Diagnostic' is not an object"),
        ('{"DCGM Diagnostic": {"x": 1}}', "'DCGM Diagnostic' has neither test_categories nor"),
    ],
)
def test_garbage_output_is_an_error_naming_what_is_wrong(fake_host, stdout, said):
    result = run(fake_host, stdout)
    assert result.status == Status.ERROR
    assert finding(result, "diag").display.startswith(
        "cannot read dcgmi diag -r 1's output: " + said
    )
    assert result.data["output"] == stdout[:300]


def test_a_timeout_is_an_error_naming_the_setting(fake_host):
    stderr = "Command '['dcgmi', 'diag', '-r', '1', '-j']' timed out after 120 seconds"
    result = run(fake_host, "", rc=-1, stderr=stderr)
    assert result.status == Status.ERROR
    assert finding(result, "diag").display == (
        "dcgmi diag -r 1 did not finish within 120 s (dcgm.timeout_seconds)"
    )
    assert "raise dcgm.timeout_seconds" in result.remedy


def test_no_dcgmi_skips_and_says_why(fake_host):
    result = dcgm.run(fake_host.context(CONFIG))
    assert result.status == Status.SKIP
    assert result.summary == "dcgmi not found: DCGM is not installed (dcgm.command)"
    assert result.findings == []


def test_level_2_runs_dcgmi_diag_r_2(fake_host):
    fake_host.command(("dcgmi", "diag", "-r", "2", "-j"), output("4x_pass.json"))
    result = dcgm.run(fake_host.context({**CONFIG, "level": 2}))
    assert result.summary.startswith("dcgmi diag -r 2: 1 test passed on 2 GPUs")


# ---------------------------------------------------------------- the report's labels


def test_finding_names_stay_bounded_words_and_the_message_stays_out_of_labels(fake_host):
    result = run(fake_host, output("339_fail.json"), rc=dcgm.EXIT_TEST_FAILED)
    document = {"checks": [result.to_dict()]}
    problems = _problems(document)
    assert problems == [
        {"check": "dcgm", "finding": "gpu1 persistence mode", "status": "fail"},
        {"check": "dcgm", "finding": "gpu0 row remap", "status": "fail"},
    ]
    assert all(f.measured["status"] == "fail" for f in result.findings)  # no text to compare


def test_an_unknown_test_name_becomes_a_bounded_finding_name(fake_host):
    document = json.loads(output("4x_fail_persistence.json"))
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["name"] = "PCIe <Bandwidth> " + "x" * 80
    test["results"][1]["warnings"][0]["warning"] = "Link: GPU 1 is slow"
    result = run(fake_host, json.dumps(document))
    (name,) = names(result)
    assert name == ("gpu1 pcie bandwidth " + "x" * 80)[: len("gpu1 ") + 40]
    assert finding(result, name).remedy == "see dcgmi diag -r 1 on the host"


# ---------------------------------------------------------------- profiles, registry, health


def test_registered_after_gpu_enabled_by_default_off_in_quick_and_a_measurement():
    ids = list(CHECKS)
    assert ids.index("dcgm") == ids.index("gpu") + 1
    default = load_profile("default", profile_schema())
    assert default.section("dcgm") == {
        "enabled": True,
        "severity": "fail",
        "command": "dcgmi",
        "level": 1,
        "timeout_seconds": 120,
    }
    assert load_profile("quick", profile_schema()).enabled("dcgm") is False
    # the Slurm health check's light run leaves it out and takes the last full report's
    assert MEASURING["dcgm"] == {"enabled": False}
    assert settings_profile(default).enabled("dcgm") is False


def test_a_failing_measurement_drains_only_after_consecutive_failures(fake_host):
    result = run(fake_host, output("4x_fail_persistence.json"), rc=dcgm.EXIT_TEST_FAILED)
    check = {**result.to_dict(), "data": {**result.data, "measured_at": "t1"}}
    once = decide([], ["dcgm"], {"dcgm": check}, "", {}, 2)
    assert once.state != UNHEALTHY
    twice = decide([], ["dcgm"], {"dcgm": check}, "", {"dcgm": {"failures": 1}}, 2)
    assert twice.state == UNHEALTHY
    assert twice.causes[0].startswith(
        "dcgm: gpu1 persistence mode Persistence Mode: Persistence mode for GPU 1 is disabled."
    )


# ---------------------------------------------------------------- a real dcgmi executable


def fake_dcgmi(tmp_path: Path, body: str) -> str:
    script = tmp_path / "bin" / "dcgmi"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(script)


def test_through_a_real_executable_and_a_real_subprocess(tmp_path):
    fixture = OUTPUTS / "4x_fail_persistence.json"
    command = fake_dcgmi(
        tmp_path,
        f'[ "$*" = "diag -r 1 -j" ] || exit 9\n'
        "echo 'Successfully ran diagnostic for group.'\n"
        f"cat '{fixture}'\n"
        "exit 226\n",
    )
    ctx = CheckContext(system=System(), config={**CONFIG, "command": command})
    result = dcgm.run(ctx)
    assert result.status == Status.FAIL
    assert result.data["exit_code"] == 226
    assert result.data["command"] == [command, "diag", "-r", "1", "-j"]
    assert names(result) == ["gpu1 persistence mode"]
    assert result.remedy == gpu.PERSISTENCE_FIX


def test_a_real_executable_that_hangs_is_stopped_at_the_timeout(tmp_path):
    command = fake_dcgmi(tmp_path, "exec sleep 30\n")
    ctx = CheckContext(
        system=System(), config={**CONFIG, "command": command, "timeout_seconds": 0.3}
    )
    result = dcgm.run(ctx)
    assert result.status == Status.ERROR
    assert result.summary == ("dcgmi diag -r 1 did not finish within 0.3 s (dcgm.timeout_seconds)")


def test_a_command_path_that_does_not_exist_skips(tmp_path):
    missing = str(tmp_path / "nowhere" / "dcgmi")
    ctx = CheckContext(system=System(), config={**CONFIG, "command": missing})
    result = dcgm.run(ctx)
    assert result.status == Status.SKIP
    assert result.summary == f"{missing} not found: DCGM is not installed (dcgm.command)"
