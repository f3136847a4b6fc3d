"""`hostcheck run --host-state`: one digest per part of what a run depends on, each changing
with what it stands for and with nothing else (the hostcheck role runs hostcheck again only
when a part changed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.host_state import HOST as SUPPORT_HOST
from tests.support.host_state import MOUNTINFO, host_state, site_packages, tree

HOST = {
    **SUPPORT_HOST,
    "/proc/sys/kernel/pid_max": "4194304\n",
    "/etc/hostcheck/dataloader.json": "{}\n",
}


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "root"
    tree(root, HOST)
    (root / "dev" / "shm").mkdir(parents=True)
    tree(site_packages(root), {"torch-2.13.0.dist-info/RECORD": "torch/__init__.py,,\n"})
    return root


def changed(argv, root, change, env=None, after_argv=None) -> list[str]:
    before = host_state(argv, root, env)
    change()
    after = host_state(after_argv or argv, root, env)
    assert set(after) == set(before)
    return sorted(part for part in after if after[part] != before[part])


RUN = ["run", "--profile", "default"]


def test_each_part_changes_with_what_it_stands_for_and_nothing_else(root):
    def write(path, text):
        return lambda: tree(root, {path: text})

    def parts(path, text):
        return changed(RUN, root, write(path, text))

    assert parts("/etc/fstab", "tmpfs /dev/shm tmpfs size=1g 0 0\n") == ["/etc/fstab"]
    remounted = MOUNTINFO.replace("size=65536k", "size=16384k")
    assert parts("/proc/self/mountinfo", remounted) == ["/dev/shm"]
    data_disk = remounted + "50 22 259:1 / /data rw - xfs /dev/nvme0n1 rw\n"
    assert parts("/proc/self/mountinfo", data_disk) == ["block-device mounts"]
    assert parts("/proc/sys/vm/swappiness", "60\n") == ["/proc/sys"]
    assert parts("/etc/sysctl.d/99-x.conf", "# note\n") == ["sysctl files"]
    assert parts("/etc/security/limits.d/x.conf", "") == ["limits"]
    assert parts("/etc/pam.d/login", "") == ["PAM"]
    assert parts("/etc/group", "render:x:109:\n") == ["users and groups"]
    assert parts("/etc/systemd/system.conf", "[Manager]\n") == ["systemd manager settings"]
    assert parts("/proc/sys/kernel/random/boot_id", "9f\n") == ["the boot"]
    governor = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    assert parts(governor, "powersave\n") == ["CPU governors and THP"]
    assert parts("/proc/driver/nvidia/version", "NVRM 550.54.15\n") == ["NVIDIA driver and GPUs"]
    assert parts("/proc/meminfo", "MemTotal:       8192000 kB\n") == ["memory and swap"]
    assert parts("/etc/hostcheck/dataloader.json", '{"a": 1}\n') == ["the DataLoader settings file"]
    reinstalled = site_packages(root) / "pillow_simd-9.5.0.dist-info" / "RECORD"
    assert changed(RUN, root, lambda: tree(reinstalled.parent, {"RECORD": ""})) == [
        "hostcheck's installation"
    ]


def test_what_moves_all_the_time_is_not_part_of_the_state(root):
    used = "Filename\tType\tSize\tUsed\tPriority\n/swap.img file 1048572 5120 -2\n"
    login = MOUNTINFO + "41 22 0:41 / /run/user/1000 rw - tmpfs tmpfs rw,size=1000k\n"
    memfree = HOST["/proc/meminfo"].replace("MemFree:         1000", "MemFree:         9")
    assert changed(RUN, root, lambda: tree(root, {"/proc/swaps": used})) == []
    assert changed(RUN, root, lambda: tree(root, {"/proc/self/mountinfo": login})) == []
    assert changed(RUN, root, lambda: tree(root, {"/proc/meminfo": memfree})) == []
    assert changed(RUN, root, lambda: tree(root, {"/tmp/scratch": "x"})) == []


def test_the_sysctl_values_are_those_the_profile_checks(root, tmp_path):
    """A live value is part of the state exactly when the run's profile checks the name."""
    pid_max = lambda: tree(root, {"/proc/sys/kernel/pid_max": "32768\n"})  # noqa: E731
    assert changed(RUN, root, pid_max) == []
    config = tmp_path / "config.yaml"
    config.write_text("checks: {sysctl: {expect: {kernel.pid_max: {min: 65536}}}}\n")
    with_config = [*RUN, "--config", str(config)]
    back = lambda: tree(root, {"/proc/sys/kernel/pid_max": "4194304\n"})  # noqa: E731
    assert changed(with_config, root, back) == ["/proc/sys"]


def test_the_command_line_the_profile_and_its_files_are_parts(root, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("checks: {shm: {min_size: 1GiB}}\n")
    with_config = [*RUN, "--config", str(config)]
    edit = lambda: config.write_text("checks: {shm: {min_size: 2GiB}}\n")  # noqa: E731
    assert changed(with_config, root, edit) == ["the profile"]
    assert changed(RUN, root, lambda: None, after_argv=[*RUN, "--set", "shm.min_size=8GiB"]) == [
        "the command line",
        "the profile",
    ]
    assert changed(RUN, root, lambda: None, after_argv=[*RUN, "--user", "trainer"]) == [
        "the command line",
        "the options",
    ]
    profile = tmp_path / "site.yaml"
    profile.write_text("extends: default\n")
    own = ["run", "--profile", str(profile)]
    assert changed(own, root, lambda: profile.write_text("extends: quick\n")) == ["the profile"]


def test_the_settings_file_read_is_the_one_the_run_would_read(root):
    elsewhere = ["run", "--set", "dataloader.path=/srv/loader.json"]
    write = lambda: tree(root, {"/srv/loader.json": "{}\n"})  # noqa: E731
    assert changed(elsewhere, root, write) == ["the DataLoader settings file"]
    env = {"HOSTCHECK_DATALOADER": "/opt/loader.json"}
    assert changed(RUN, root, lambda: tree(root, {"/opt/loader.json": "{}"}), env) == [
        "the DataLoader settings file"
    ]
    default = lambda: tree(root, {"/etc/hostcheck/dataloader.json": "[]\n"})  # noqa: E731
    assert changed(RUN, root, default, env) == []


def test_the_command_prints_the_parts_and_runs_no_check(tmp_path):
    report = tmp_path / "report.json"
    argv = ["run", "--profile", "quick", "--report", f"json:{report}", "--host-state"]
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    parts = json.loads(done.stdout)
    assert set(parts) >= {"the command line", "the profile", "/dev/shm", "/proc/sys"}
    assert all(len(value) == 16 for value in parts.values())
    assert not report.exists()
    refused = subprocess.run(
        [sys.executable, "-m", "hostcheck", "run", "--profile", "nosuch", "--host-state"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2
    assert "nosuch: no such profile" in refused.stderr
