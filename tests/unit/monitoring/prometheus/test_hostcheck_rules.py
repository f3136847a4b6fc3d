"""The Prometheus rules shipped in monitoring/prometheus: promtool finds them valid, their unit
tests pass (each alert fires on its series and not on a single noisy run, a host in its grace
period or a timer off on purpose), every hostcheck series they read is one hostcheck or the
role writes, and the textfile of a real run passes `promtool check metrics`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.paths import CHECKOUT as REPO

RULES = REPO / "monitoring" / "prometheus" / "hostcheck-rules.yml"
RULE_TESTS = REPO / "monitoring" / "prometheus" / "hostcheck-rules.test.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (make test installs Debian's prometheus)"
)
# what the hostcheck role writes when it switches the timer off (roles/hostcheck/tasks/timer.yml)
ROLE_SERIES = {"hostcheck_timer_enabled"}


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def textfile(tmp_path_factory) -> str:
    """The timer's textfile from a real run on this machine, the loop measured (1 s)."""
    path = tmp_path_factory.mktemp("textfile") / "hostcheck.prom"
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "run", "--profile", "quick",
         "--set", "loop.enabled=true", "--set", "loop.seconds=1", "--set", "loop.sample=busy",
         "--schedule", "*:0/15", "--report", f"prom:{path}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return path.read_text()


@pytest.fixture(scope="module")
def healthcheck_textfile(tmp_path_factory) -> str:
    """The Slurm health check's textfile from a real run on this machine (no Slurm: its
    verdict only)."""
    folder = tmp_path_factory.mktemp("healthcheck")
    path = folder / "hostcheck-healthcheck.prom"
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "healthcheck", "--profile", "quick",
         "--state-dir", str(folder / "state"), "--measurements", str(folder / "none.json"),
         "--textfile", str(path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1, 2), done.stderr
    return path.read_text()


@needs_promtool
def test_promtool_check_metrics_finds_nothing_in_the_healthcheck_textfile(healthcheck_textfile):
    done = promtool("check", "metrics", stdin=healthcheck_textfile)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr
    assert "hostcheck_healthcheck_drain_capped 0\n" in healthcheck_textfile


@needs_promtool
def test_promtool_finds_the_rules_valid():
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout


@needs_promtool
def test_the_rules_unit_tests_pass():
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_promtool_check_metrics_finds_nothing_in_the_textfile(textfile):
    done = promtool("check", "metrics", stdin=textfile)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


def test_the_textfile_has_what_the_rules_read(textfile, healthcheck_textfile):
    written = set(
        re.findall(r"^(hostcheck_[a-z_]+)[{ ]", textfile + healthcheck_textfile, re.MULTILINE)
    )
    assert {
        "hostcheck_loop_data_wait_ratio",
        "hostcheck_loop_data_wait_threshold_ratio",
        "hostcheck_run_interval_seconds",
        "hostcheck_check_status",
    } <= written
    assert "hostcheck_run_interval_seconds 900\n" in textfile
    exprs = [
        rule["expr"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
    ]
    # series names, not recording rules' level:name:operation
    read = {
        m for expr in exprs for m in re.findall(r"(?<![:\w])(hostcheck_[a-z_]+)(?![:\w])", expr)
    }
    assert "hostcheck_check_remedy_info" in read
    assert read - written - ROLE_SERIES == set()
