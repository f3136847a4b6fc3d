"""The node-problem-detector plugin shipped in monitoring/: its configuration and the
custom-plugin contract (exit 0 OK, 1 problem, 2 unknown; the message within NPD's output limit;
done before NPD's timeout), run here with the configuration's own arguments. No kubelet or NPD
runs here: what NPD does with the result, and nsenter into a real node's namespaces, are
untested."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import CHECKOUT as REPO

CONFIG = json.loads((REPO / "monitoring/node-problem-detector/hostcheck-monitor.json").read_text())
RULE = CONFIG["rules"][0]
# This machine's fixed limits and kernel fail checks whatever the plugin does: left out.
PASSING = "checks: {ulimits: {enabled: false}, sysctl: {enabled: false}, cpu: {enabled: false}, "
PASSING += "memory: {enabled: false}, shm: {min_size: 1MiB, min_free: 1MiB}}\n"


def seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def plugin_args(tmp_path: Path, *more: str) -> list[str]:
    """The rule's command after nsenter's `--`, with this checkout's hostcheck and the state in
    tmp_path."""
    args = RULE["args"][RULE["args"].index("--") + 1 :]
    assert args[0].endswith("/bin/hostcheck") and args[1] == "healthcheck"
    args = [sys.executable, "-m", "hostcheck", *args[1:]]
    args[args.index("--state-dir") + 1] = str(tmp_path / "state")
    args[args.index("--measurements") + 1] = str(tmp_path / "report.json")
    config = tmp_path / "passing.yaml"
    config.write_text(PASSING)
    return [*args, "--config", str(config), *more]


def invoke(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    began = time.monotonic()
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=seconds(RULE["timeout"]), check=False
    )
    return done, time.monotonic() - began


def test_the_configuration_is_a_custom_plugin_with_one_stable_condition():
    assert CONFIG["plugin"] == "custom"
    assert [c["type"] for c in CONFIG["conditions"]] == ["HostcheckUnhealthy"]
    assert RULE["type"] == "permanent" and RULE["condition"] == "HostcheckUnhealthy"
    assert RULE["path"] == "/usr/bin/nsenter" and option(RULE["args"], "--target") == "1"
    # hostcheck's own budget ends the run before NPD's timeout kills it
    assert float(option(RULE["args"], "--budget")) < seconds(RULE["timeout"])
    assert seconds(RULE["timeout"]) <= seconds(CONFIG["pluginConfig"]["timeout"])
    limit = CONFIG["pluginConfig"]["max_output_length"]
    assert int(option(RULE["args"], "--max-length")) == limit


@pytest.mark.parametrize(
    ("more", "status", "said"),
    [
        ((), 0, "healthy"),
        (("--set", "shm.min_size=1PiB", "--set", "shm.min_free=1PiB"), 1, "unhealthy: shm"),
    ],
)
def test_ok_and_problem_exit_0_and_1_with_one_line_within_the_output_limit(
    tmp_path, more, status, said
):
    done, took = invoke(plugin_args(tmp_path, *more))
    assert done.returncode == status, done.stdout + done.stderr
    line = done.stdout.rstrip("\n")
    assert "\n" not in line and said in line
    assert len(line) <= CONFIG["pluginConfig"]["max_output_length"]
    assert took < float(option(RULE["args"], "--budget"))


def test_a_run_that_cannot_assess_is_unknown_exit_2(tmp_path):
    (tmp_path / "state").mkdir()
    with open(tmp_path / "state" / "lock", "a") as held:  # another run holds the lock
        fcntl.flock(held, fcntl.LOCK_EX)
        done, _ = invoke(plugin_args(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown: another health check holds" in done.stdout
    assert len(done.stdout.rstrip("\n")) <= CONFIG["pluginConfig"]["max_output_length"]
