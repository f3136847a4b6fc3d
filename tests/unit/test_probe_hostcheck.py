"""The hostcheck role's probe module (plugins/modules/hostcheck_probe.py) on a tree standing in
for a host's root, and the plan the validate action makes from what it reads: what install,
config and timer must change, and whether hostcheck runs (asked, something changed, or its
latest report does not stand for the host as it is)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.action.hostcheck_validate import (
    config_reasons,
    install_reasons,
    plan_message,
    run_reasons,
    stale_reasons,
    timer_reasons,
    unmet,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import hostcheck_probe

MOUNTINFO = (
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 22 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=65536k\n"
    "40 22 0:40 / /run/user/0 rw,nosuid,nodev shared:9 - tmpfs tmpfs rw,size=1000k,mode=700\n"
)
HOST = {
    "/proc/self/mountinfo": MOUNTINFO,
    "/proc/sys/kernel/random/boot_id": "0b1c\n",
    "/proc/sys/vm/swappiness": "10\n",
    "/proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t16777216\n",
    "/proc/meminfo": "MemTotal:       16384000 kB\nMemFree:         1000 kB\n",
    "/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n/swap.img file 1048572 0 -2\n",
    "/etc/fstab": "tmpfs /dev/shm tmpfs size=64m 0 0\n",
    "/etc/security/limits.d/90-hostcheck-training.conf": "* soft nofile 65536\n",
    "/etc/sysctl.d/90-hostcheck-training.conf": "vm.swappiness = 10\n",
    "/etc/systemd/system.conf.d/90-hostcheck-training.conf": "[Manager]\n",
    "/etc/pam.d/sshd": "session required pam_limits.so\n",
    "/etc/passwd": "root:x:0:0::/root:/bin/bash\n",
    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
}
RECORD_LINES = ["hostcheck/__init__.py,sha256=abc,10", "hostcheck/cli.py,sha256=def,20"]
PASSED = {
    "schema_version": 1,
    "tool": {"version": "0.1.0"},
    "profile": {"name": "default"},
    "started_at": "2026-01-02T03:04:05Z",
    "exit_code": 0,
    "verdict": "warn",
}


def tree(root, files: dict) -> None:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def install(venv, name: str, version: str, record=(), requires=()) -> None:
    folder = venv / "lib" / "python3.11" / "site-packages" / f"{name}-{version}.dist-info"
    headers = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    tree(
        folder,
        {
            "METADATA": "Metadata-Version: 2.1\n" + "\n".join(headers) + "\n\nlong text\n",
            "RECORD": "\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\n",
        },
    )


@pytest.fixture
def host(tmp_path):
    """A converged host: hostcheck and torch in the venv, a config file, a passing report."""
    root = tmp_path / "root"
    tree(root, HOST)
    (root / "dev" / "shm").mkdir(parents=True)
    venv = tmp_path / "venv"
    tree(venv, {"bin/python": ""})
    install(venv, "hostcheck", "0.1.0", RECORD_LINES, ['torch>=2.1; extra == "node"'])
    install(venv, "torch", "2.13.0+cpu")
    tree(tmp_path, {"etc/hostcheck/config.yaml": "checks: {}\n"})
    tree(tmp_path, {"reports/report.json": json.dumps(PASSED)})
    spec = {
        "venv": str(venv),
        "command": [f"{venv}/bin/hostcheck", "run", "--profile", "default"],
        "config_file": str(tmp_path / "etc/hostcheck/config.yaml"),
        "profile": "default",
        "report_dir": str(tmp_path / "reports"),
        "unit_dir": str(tmp_path / "units"),
        "textfile_dir": str(tmp_path / "textfile"),
        "sysctl": ["vm.swappiness", "net.ipv4.tcp_rmem", "vm.nosuch"],
    }
    return {"root": root, "spec": spec, "tmp": tmp_path, "venv": venv}


def no_commands(argv):
    raise AssertionError(f"ran {argv}")


def read(host, run=no_commands) -> dict:
    return hostcheck_probe.probe(host["spec"], run, str(host["root"]))


def recorded(host) -> dict:
    found = read(host)
    hostcheck_probe.write_record(hostcheck_probe.record_of(found), host["spec"]["report_dir"])
    return read(host)


def changed_parts(host, change) -> list[str]:
    before = read(host)["parts"]
    change()
    after = read(host)["parts"]
    return sorted(part for part in after if after[part] != before.get(part))


# ---------------------------------------------------------------- what the module reads


def test_the_venv_its_hostcheck_and_the_report_are_read(host):
    found = read(host)
    assert found["venv"] == {
        "python": True,
        "distributions": {"hostcheck": "0.1.0", "torch": "2.13.0+cpu"},
        "hostcheck": {
            "version": "0.1.0",
            "record": RECORD_LINES,
            "requires": ['torch>=2.1; extra == "node"'],
        },
    }
    assert found["config"] == {"text": "checks: {}\n", "mode": "0644"}
    report = found["report"]
    assert report["started_at"] == PASSED["started_at"] and report["exit_code"] == 0
    assert report["tool_version"] == "0.1.0" and report["profile"] == "default"
    assert found["recorded"] is None
    assert found["units"] == {"hostcheck.service": None, "hostcheck.timer": None}
    assert found["systemd"] is False and found["timer"] == {}


def test_an_unreadable_report_and_a_missing_venv(host):
    (host["tmp"] / "reports/report.json").write_text("{half")
    host["spec"]["venv"] = str(host["tmp"] / "nowhere")
    found = read(host)
    assert "unreadable" in found["report"]
    assert found["venv"] == {"python": False, "distributions": {}, "hostcheck": None}


def test_units_and_the_timer_state_with_systemd(host):
    tree(host["root"], {"/run/systemd/system/.keep": ""})
    tree(host["tmp"], {"units/hostcheck.timer": "[Timer]\n"})
    asked = []

    def systemctl(argv):
        asked.append(argv)
        return 0, "UnitFileState=enabled\nActiveState=active\nNeedDaemonReload=no\n", ""

    found = read(host, systemctl)
    assert found["units"]["hostcheck.timer"]["text"] == "[Timer]\n"
    assert found["timer"] == {
        "UnitFileState": "enabled",
        "ActiveState": "active",
        "NeedDaemonReload": "no",
    }
    assert asked[0][:3] == ["systemctl", "show", "hostcheck.timer"]


def test_each_part_changes_with_what_it_stands_for_and_nothing_else(host):
    root = host["root"]

    def write(path, text):
        return lambda: tree(root, {path: text})

    assert changed_parts(host, write("/etc/fstab", "tmpfs /dev/shm tmpfs size=1g 0 0\n")) == [
        "/etc/fstab"
    ]
    remounted = MOUNTINFO.replace("size=65536k", "size=16384k")
    assert changed_parts(host, write("/proc/self/mountinfo", remounted)) == ["/dev/shm"]
    assert changed_parts(host, write("/proc/sys/vm/swappiness", "60\n")) == ["/proc/sys"]
    assert changed_parts(host, write("/etc/sysctl.d/99-x.conf", "# note\n")) == ["sysctl files"]
    assert changed_parts(host, write("/etc/security/limits.d/x.conf", "")) == ["limits"]
    assert changed_parts(host, write("/proc/sys/kernel/random/boot_id", "9f\n")) == ["the boot"]
    gov = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    assert changed_parts(host, write(gov, "powersave\n")) == ["CPU governors and THP"]
    assert changed_parts(host, lambda: install(host["venv"], "pillow-simd", "9.5.0")) == [
        "the venv's distributions"
    ]
    config = host["tmp"] / "etc/hostcheck/config.yaml"
    assert changed_parts(host, lambda: config.write_text("checks: {shm: {}}\n")) == [
        "hostcheck_config_file"
    ]


def test_what_moves_all_the_time_is_not_part_of_the_state(host):
    root = host["root"]
    used = "Filename\tType\tSize\tUsed\tPriority\n/swap.img file 1048572 5120 -2\n"
    login = MOUNTINFO + "41 22 0:41 / /run/user/1000 rw - tmpfs tmpfs rw,size=1000k\n"
    memfree = HOST["/proc/meminfo"].replace("MemFree:         1000", "MemFree:         9")
    assert changed_parts(host, lambda: tree(root, {"/proc/swaps": used})) == []
    assert changed_parts(host, lambda: tree(root, {"/proc/self/mountinfo": login})) == []
    assert changed_parts(host, lambda: tree(root, {"/proc/meminfo": memfree})) == []


def test_a_profile_file_is_a_part_of_its_own(host):
    profile = host["tmp"] / "profile.yaml"
    profile.write_text("extends: default\n")
    host["spec"]["profile"] = str(profile)
    assert changed_parts(host, lambda: profile.write_text("extends: quick\n")) == [
        "hostcheck_profile (file)"
    ]


def test_the_record_keeps_the_parts_and_the_report_it_was_made_for(host):
    found = recorded(host)
    assert found["recorded"]["parts"] == found["parts"]
    assert found["recorded"]["report"] == {
        "sha256": found["report"]["sha256"],
        "started_at": PASSED["started_at"],
    }
    path = host["tmp"] / "reports" / "report.host-state.json"
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_a_report_that_did_not_pass_is_not_recorded(host):
    (host["tmp"] / "reports/report.json").write_text(json.dumps({**PASSED, "exit_code": 1}))
    assert hostcheck_probe.record_of(read(host)) is None
    (host["tmp"] / "reports/report.json").unlink()
    assert hostcheck_probe.record_of(read(host)) is None


# ---------------------------------------------------------------- whether the report stands

REPORT = "/var/lib/hostcheck/report.json"


def test_a_recorded_passing_report_stands_until_the_host_state_drifts(host):
    assert stale_reasons(recorded(host), REPORT) == []
    tree(host["root"], {"/proc/self/mountinfo": MOUNTINFO.replace("65536k", "16384k")})
    tree(host["root"], {"/etc/fstab": "# edited\n"})
    assert stale_reasons(read(host), REPORT) == [
        "changed since the report of 2026-01-02T03:04:05Z: /dev/shm, /etc/fstab"
    ]


def test_a_report_rewritten_since_the_record_does_not_stand(host):
    recorded(host)
    rewritten = {**PASSED, "started_at": "2026-02-02T00:00:00Z"}
    (host["tmp"] / "reports/report.json").write_text(json.dumps(rewritten))
    assert stale_reasons(read(host), REPORT) == [
        "no record of the host state the report of 2026-02-02T00:00:00Z was made for"
    ]


def test_no_report_a_failed_one_and_no_record(host):
    found = read(host)
    assert stale_reasons({**found, "report": None}, REPORT) == [f"there is no report at {REPORT}"]
    failed = {**found, "report": {**found["report"], "exit_code": 1}}
    assert stale_reasons(failed, REPORT) == [
        "the report of 2026-01-02T03:04:05Z did not pass (exit 1)"
    ]
    assert stale_reasons(found, REPORT) == [
        "no record of the host state the report of 2026-01-02T03:04:05Z was made for"
    ]


def test_hostcheck_runs_when_asked_when_the_role_changes_it_or_when_the_report_is_stale():
    assert run_reasons("changed", False, []) == []
    assert run_reasons("always", False, []) == ["hostcheck_measure is always"]
    assert run_reasons("changed", True, []) == ["this run installs or configures hostcheck"]
    assert run_reasons("changed", False, ["x changed"]) == ["x changed"]


def test_the_message_says_what_changes_and_why_hostcheck_runs_or_not():
    nothing = {"install": [], "config": [], "timer": [], "run": []}
    at = "2026-01-02T03:04:05Z"
    assert plan_message(nothing, True, "/v", at) == (
        "nothing to install, configure or set up | hostcheck is not run: its report of "
        f"{at} passed and nothing it checks changed since (hostcheck_measure: always runs it)"
    )
    assert plan_message(nothing, False, "/v", at) == (
        "nothing to install, configure or set up | hostcheck_run is false: hostcheck is "
        "installed in /v but not run"
    )
    some = {**nothing, "config": ["/c differs"], "run": ["a", "b"]}
    assert plan_message(some, True, "/v", at) == "config: /c differs | hostcheck runs: a; b"


# ---------------------------------------------------------------- what install must do

WHEEL = {"version": "0.1.0", "record": RECORD_LINES, "filename": "hostcheck-0.1.0.whl"}


def test_a_current_venv_needs_nothing(host):
    venv = read(host)["venv"]
    assert install_reasons(venv, "/v", WHEEL, "", ["torch==2.13.0"]) == ([], False)
    assert install_reasons(venv, "/v", {}, "hostcheck[node]==0.1.0", []) == ([], False)


def test_what_makes_hostcheck_install_again(host):
    venv = read(host)["venv"]
    other = {**WHEEL, "version": "0.2.0"}
    assert install_reasons(venv, "/v", other, "", []) == (
        ["hostcheck 0.1.0 is installed, the wheel is 0.2.0"],
        True,
    )
    rebuilt = {**WHEEL, "record": ["hostcheck/__init__.py,sha256=xyz,11"]}
    assert install_reasons(venv, "/v", rebuilt, "", []) == (
        ["hostcheck 0.1.0 in /v has other files than hostcheck-0.1.0.whl"],
        True,
    )
    assert install_reasons(venv, "/v", {}, "hostcheck==0.2.0", []) == (
        ["hostcheck 0.1.0 is installed, hostcheck==0.2.0 is wanted"],
        True,
    )
    missing = {**venv, "hostcheck": None}
    assert install_reasons(missing, "/v", WHEEL, "", []) == (
        ["hostcheck is not installed in /v"],
        True,
    )
    assert install_reasons({**venv, "python": False}, "/v", WHEEL, "", []) == (
        ["there is no venv at /v"],
        True,
    )


def test_packages_before_are_installed_without_reinstalling_hostcheck(host):
    venv = read(host)["venv"]
    assert install_reasons(venv, "/v", WHEEL, "", ["torch==2.14.0", "numpy"]) == (
        [
            "torch 2.13.0+cpu is installed, torch==2.14.0 is wanted "
            "(hostcheck_pip_packages_before)",
            "numpy is not installed (hostcheck_pip_packages_before)",
        ],
        False,
    )


def test_requirements_with_extras_urls_and_local_versions():
    installed = {"hostcheck": "0.1.0", "torch": "2.13.0+cpu"}
    requires = ['torch>=2.1; extra == "node"', 'nvidia-ml-py>=12; extra == "node"', "rich"]
    assert unmet("torch==2.13.0", installed) == ""  # a local version matches its release
    assert unmet("Torch>=2.1", installed) == ""
    assert (
        unmet("hostcheck==0.1.0", installed, requires)
        == "rich is not installed (needed by hostcheck==0.1.0)"
    )
    with_rich = {**installed, "rich": "13.0"}
    assert unmet("hostcheck==0.1.0", with_rich, requires) == ""
    assert unmet("hostcheck[node]==0.1.0", with_rich, requires) == (
        "nvidia-ml-py is not installed (needed by hostcheck[node]==0.1.0)"
    )
    assert unmet("hostcheck @ https://example.org/h.whl", installed) == (
        "hostcheck @ https://example.org/h.whl: a URL (pip decides)"
    )
    assert unmet("-e ./hostcheck", installed).endswith("(pip decides)")


# ---------------------------------------------------------------- config and timer

CONFIG = "/etc/hostcheck/config.yaml"
UNITS = {"hostcheck.service": "[Service]\n", "hostcheck.timer": "[Timer]\n"}


def test_config_file_reasons():
    wanted = "# Written by Ansible\nchecks: {}\n"
    assert config_reasons({"text": wanted, "mode": "0644"}, wanted, CONFIG) == []
    assert config_reasons(None, wanted, CONFIG) == [f"{CONFIG} does not exist"]
    assert config_reasons({"text": "x", "mode": "0644"}, wanted, CONFIG) == [
        f"{CONFIG} differs from hostcheck_config"
    ]
    assert config_reasons({"text": wanted, "mode": "0600"}, wanted, CONFIG) == [
        f"{CONFIG} has mode 0600, not 0644"
    ]
    assert config_reasons(None, None, CONFIG) == []
    assert config_reasons({"text": "x", "mode": "0644"}, None, CONFIG) == [
        f"{CONFIG} is there while hostcheck_config is empty"
    ]


def timer_read(units=None, systemd=True, state=None, dirs=None) -> dict:
    return {
        "units": units or {"hostcheck.service": None, "hostcheck.timer": None},
        "systemd": systemd,
        "timer": state or {},
        "dirs": dirs or {"/etc/systemd/system": True, "/tf": True, "/r": True},
    }


def written(**texts) -> dict:
    return {
        name: {"text": text, "mode": "0644", "uid": 0}
        for name, text in {**UNITS, **{k.replace("_", "."): v for k, v in texts.items()}}.items()
    }


def test_timer_reasons_when_it_is_wanted():
    running = {"UnitFileState": "enabled", "ActiveState": "active", "NeedDaemonReload": "no"}
    unit_dir = "/etc/systemd/system"
    assert timer_reasons(timer_read(written(), state=running), UNITS, unit_dir) == []
    assert timer_reasons(timer_read(written(), systemd=False), UNITS, unit_dir) == []
    assert timer_reasons(
        timer_read(written(hostcheck_timer="old"), state=running), UNITS, unit_dir
    ) == ["hostcheck.timer differs from the hostcheck_timer_* variables"]
    stopped = {**running, "ActiveState": "inactive", "NeedDaemonReload": "yes"}
    assert timer_reasons(timer_read(written(), state=stopped), UNITS, unit_dir) == [
        "hostcheck.timer is enabled and inactive, not enabled and active",
        "systemd has not loaded the units as they are",
    ]
    fresh = timer_read(systemd=False, dirs={unit_dir: True, "/tf": False, "/r": True})
    assert timer_reasons(fresh, UNITS, unit_dir) == [
        "/tf does not exist",
        f"hostcheck.service is not in {unit_dir}",
        f"hostcheck.timer is not in {unit_dir}",
    ]


def test_timer_reasons_when_it_is_not_wanted():
    unit_dir = "/etc/systemd/system"
    assert timer_reasons(timer_read(), None, unit_dir) == []
    left = timer_read({"hostcheck.service": None, "hostcheck.timer": {"text": "", "mode": "0644"}})
    assert timer_reasons(left, None, unit_dir) == [f"hostcheck.timer still in {unit_dir}"]
