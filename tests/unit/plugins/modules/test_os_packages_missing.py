"""plugins/modules/os_packages_missing.py: which packages the roles still have to install,
read from the package database (this machine's own dpkg for apt; rpm's messages for dnf)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import os_packages_missing as module


class Runner:
    """What AnsibleModule.run_command is asked to run, answered by the real command."""

    def __init__(self) -> None:
        self.argv: list[str] = []

    def run_command(self, argv):
        self.argv = argv
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="needs dpkg-query (a Debian machine)")
def test_dpkg_names_the_packages_not_installed_in_the_order_given():
    runner = Runner()
    names = ["no-such-package-xyz", "dpkg", "coreutils:amd64", "also-not-there"]
    assert module.missing(runner, names, "apt") == ["no-such-package-xyz", "also-not-there"]
    assert runner.argv[0] == "dpkg-query"


def test_dpkg_status_counts_only_installed_packages():
    output = "\n".join(
        [
            "gcc ii ",  # installed
            "nvidia-driver hi ",  # on hold, installed
            "libfoo rc ",  # removed, its configuration left
            "libbar un ",  # known but never installed
            "libhalf iF ",  # half-configured
        ]
    )
    assert module.installed_by_dpkg(output) == {"gcc", "nvidia-driver"}


def test_rpm_names_what_nothing_provides():
    output = "gcc-12.2.0-1.x86_64\nno package provides zlib1g-dev\npython3-3.9.18-1.el9.x86_64\n"
    assert module.missing_by_rpm(output) == {"zlib1g-dev"}


def test_nothing_asked_runs_nothing():
    runner = Runner()
    assert module.missing(runner, [], "dnf") == []
    assert runner.argv == []
