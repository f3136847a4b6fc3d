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


def test_rpm_names_what_is_not_installed_by_that_name():
    output = (
        "package kernel-devel-5.14.0-427.el9.x86_64 is not installed\nbash-5.1.8-9.el9.x86_64\n"
    )
    assert module.missing_by_rpm(output) == {"kernel-devel-5.14.0-427.el9.x86_64"}


class ScriptedRpm(Runner):
    """rpm of a host with bash installed, which provides /bin/sh and nothing named sh."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def run_command(self, argv):
        self.calls.append(argv)
        names = argv[argv.index("--") + 1 :]
        if "--whatprovides" in argv:
            lines = [
                "bash-5.1.8-9.el9.x86_64" if n == "sh" else f"no package provides {n}"
                for n in names
            ]
        else:
            lines = [
                "bash-5.1.8-9.el9.x86_64"
                if n.startswith("bash")
                else f"package {n} is not installed"
                for n in names
            ]
        return 0, "\n".join(lines), ""


def test_rpm_counts_a_name_installed_by_its_package_name_or_what_a_package_provides():
    rpm = ScriptedRpm()
    names = ["bash-5.1.8-9.el9.x86_64", "sh", "zlib-devel"]
    assert module.missing(rpm, names, "dnf") == ["zlib-devel"]
    assert rpm.calls == [
        ["rpm", "-q", "--", *names],
        ["rpm", "-q", "--whatprovides", "--", "sh", "zlib-devel"],
    ]


def test_rpm_asks_nothing_more_when_every_name_is_a_package():
    rpm = ScriptedRpm()
    assert module.missing(rpm, ["bash"], "dnf") == []
    assert len(rpm.calls) == 1


def test_nothing_asked_runs_nothing():
    runner = Runner()
    assert module.missing(runner, [], "dnf") == []
    assert runner.argv == []
