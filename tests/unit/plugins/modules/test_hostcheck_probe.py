"""The hostcheck role's probe module (plugins/modules/hostcheck_probe.py) on a tree standing in
for a host's root, and the plan the validate action makes from what it reads: what install,
config, timer and the DataLoader settings file must change, and whether hostcheck runs (asked,
something changed, or its latest report does not stand for the host as it is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import hostcheck_probe
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.hostcheck_rules import (
    config_reasons,
    dataloader_reasons,
    dataloader_workload,
    install_reasons,
    plan_message,
    run_reasons,
    stale_reasons,
    sweep_argv,
    timer_reasons,
    unmet,
)

from tests.support.host_state import HOST, MOUNTINFO, command_on, host_state, tree
from tests.support.role_dataloader import HOST as MEASURED_HOST
from tests.support.role_dataloader import PATH, SETTINGS, VARIABLES, found, settings

RECORD_LINES = ["hostcheck/__init__.py,sha256=abc,10", "hostcheck/cli.py,sha256=def,20"]
PASSED = {
    "schema_version": 1,
    "tool": {"version": "0.1.0"},
    "profile": {"name": "default"},
    "started_at": "2026-01-02T03:04:05Z",
    "exit_code": 0,
    "verdict": "warn",
}


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
    tree(venv, {"bin/python": "", "bin/hostcheck": ""})
    install(venv, "hostcheck", "0.1.0", RECORD_LINES, ['torch>=2.1; extra == "node"'])
    install(venv, "torch", "2.13.0+cpu")
    tree(tmp_path, {"etc/hostcheck/config.yaml": "checks: {}\n"})
    tree(tmp_path, {"reports/report.json": json.dumps(PASSED)})
    spec = {
        "venv": str(venv),
        "command": [f"{venv}/bin/hostcheck", "run", "--profile", "default"],
        "config_file": str(tmp_path / "etc/hostcheck/config.yaml"),
        "report_dir": str(tmp_path / "reports"),
        "unit_dir": str(tmp_path / "units"),
        "textfile_dir": str(tmp_path / "textfile"),
    }
    return {"root": root, "spec": spec, "tmp": tmp_path, "venv": venv}


def no_systemctl(argv):
    raise AssertionError(f"ran {argv}")


def read(host, systemctl=no_systemctl) -> dict:
    """The probe on the host's tree, hostcheck --host-state answering as it would there."""
    hostcheck = command_on(host["root"])

    def run(argv):
        return hostcheck(argv) if argv[0] == host["spec"]["command"][0] else systemctl(argv)

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


def test_the_parts_are_what_the_venvs_hostcheck_says(host):
    """The probe has no rule of its own for the host state: it runs the role's hostcheck
    command line with --host-state."""
    found = read(host)
    assert found["parts"] == host_state(host["spec"]["command"][1:], host["root"])
    assert found["parts_unread"] == ""
    (host["venv"] / "bin" / "hostcheck").unlink()
    missing = read(host)
    assert missing["parts"] is None
    assert missing["parts_unread"] == f"{host['venv']}/bin/hostcheck does not exist"
    (host["venv"] / "bin" / "hostcheck").write_text("")
    host["spec"]["command"][3] = "nosuch"
    refused = read(host)
    assert refused["parts"] is None
    assert refused["parts_unread"].startswith(f"{host['venv']}/bin/hostcheck run --host-state ")
    assert "nosuch: no such profile" in refused["parts_unread"]


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


def test_a_host_state_hostcheck_cannot_read_makes_hostcheck_run(host):
    found = recorded(host)
    unread = {**found, "parts": None, "parts_unread": "/v/bin/hostcheck does not exist"}
    assert stale_reasons(unread, REPORT) == [
        "the host state cannot be read: /v/bin/hostcheck does not exist"
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


# ---------------------------------------------------------------- the DataLoader settings file

TOPOLOGY = {
    # 4 online CPUs, two threads on each of 2 cores; cpu4 is offline
    "/sys/devices/system/cpu/online": "0-3\n",
    **{
        f"/sys/devices/system/cpu/cpu{cpu}/topology/{name}": f"{value}\n"
        for cpu in range(5)
        for name, value in (("physical_package_id", 0), ("die_id", 0), ("core_id", cpu % 2))
    },
}
PCI = {
    # an NVIDIA 3D controller, its audio function, and another vendor's VGA
    "/sys/bus/pci/devices/0000:3b:00.0/vendor": "0x10de\n",
    "/sys/bus/pci/devices/0000:3b:00.0/class": "0x030200\n",
    "/sys/bus/pci/devices/0000:3b:00.1/vendor": "0x10de\n",
    "/sys/bus/pci/devices/0000:3b:00.1/class": "0x040300\n",
    "/sys/bus/pci/devices/0000:02:00.0/vendor": "0x1a03\n",
    "/sys/bus/pci/devices/0000:02:00.0/class": "0x030000\n",
}


@pytest.fixture
def loader_host(host):
    """The converged host with the role's DataLoader settings file in its tmp folder."""
    tree(host["root"], {**TOPOLOGY, **PCI})
    path = host["tmp"] / "etc/hostcheck/dataloader.json"
    tree(host["tmp"], {"etc/hostcheck/dataloader.json": json.dumps(SETTINGS)})
    host["spec"]["dataloader_path"] = str(path)
    host["loader"] = path
    return host


def test_the_settings_file_and_what_it_is_judged_by_are_read(loader_host):
    read_ = read(loader_host)["dataloader"]
    assert read_["path"] == str(loader_host["loader"])
    assert read_["settings"] == SETTINGS
    # the venv holds hostcheck's metadata but not its package: nothing can judge the file
    assert read_["verdict"] == {
        "state": "unjudged",
        "problem": f"hostcheck is not installed in {loader_host['venv']}",
    }
    assert read_["host"] == {"physical_cores": 2, "gpus": 1}
    assert read_["dataset_is_dir"] is None
    loader_host["spec"]["dataloader_dataset"] = str(loader_host["tmp"])
    assert read(loader_host)["dataloader"]["dataset_is_dir"] is True


def test_an_absent_malformed_or_foreign_settings_file(loader_host):
    path = loader_host["loader"]
    for text, said in (
        ("{half", "not JSON: "),
        ("[1, 2]", "not a JSON object"),
        ("\xff", "not JSON: "),
    ):
        path.write_text(text, errors="surrogateescape")
        assert read(loader_host)["dataloader"]["settings"]["malformed"].startswith(said)
    path.write_text('{"kind": "mine"}')
    assert read(loader_host)["dataloader"]["settings"] == {"kind": "mine"}
    path.unlink()
    assert read(loader_host)["dataloader"]["settings"] is None
    assert read(loader_host)["dataloader"]["verdict"] is None
    del loader_host["spec"]["dataloader_path"]
    assert read(loader_host)["dataloader"] is None


def test_the_venvs_hostcheck_judges_the_settings_file_as_training_code_would(loader_host):
    """The probe asks hostcheck.dataloader of the venv's hostcheck (read(), training code's
    call) whether the file is valid and stands for this host; the role has no rule of its
    own."""
    import os
    import sys

    import hostcheck
    from hostcheck.dataloader import writing

    package = Path(hostcheck.__file__).parent
    site = loader_host["venv"] / "lib" / "python3.11" / "site-packages"
    for source in [package / "__init__.py", *(package / "dataloader").glob("*.py")]:
        target = site / "hostcheck" / source.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())
    before = dict(sys.modules)
    here, cpus = os.uname().nodename, os.cpu_count() or 1
    assert read(loader_host)["dataloader"]["verdict"] == {
        "state": "stale",
        "problem": f"stale: measured on node1 with 8 CPUs, this is {here} with {cpus} CPUs: "
        f"measure again with hostcheck loop --sweep --write {loader_host['loader']} (role "
        "variable hostcheck_dataloader_enabled)",
    }
    this_host = writing.this_host(4, 16 * 2**30, "cpu")._asdict()
    loader_host["loader"].write_text(json.dumps(settings(host=this_host)))
    assert read(loader_host)["dataloader"]["verdict"] == {"state": "ok", "problem": ""}
    lacking = {k: v for k, v in SETTINGS.items() if k != "measured"}
    loader_host["loader"].write_text(json.dumps(lacking))
    assert read(loader_host)["dataloader"]["verdict"] == {
        "state": "malformed",
        "problem": "measured: missing",
    }
    loader_host["loader"].write_text("{half")
    verdict = read(loader_host)["dataloader"]["verdict"]
    assert verdict["state"] == "malformed" and verdict["problem"].startswith("not valid JSON: ")
    # this process's own hostcheck modules are as they were
    assert {n: sys.modules.get(n) for n in before if n.startswith("hostcheck")} == {
        n: m for n, m in before.items() if n.startswith("hostcheck")
    }


def test_cores_without_a_readable_topology_are_the_online_cpus(tmp_path):
    tree(tmp_path, {"/sys/devices/system/cpu/online": "0-2,5\n"})
    assert hostcheck_probe.physical_cores(str(tmp_path)) == 4
    assert hostcheck_probe.physical_cores(str(tmp_path / "none")) == 1


def test_the_settings_file_is_a_part_of_the_host_state(loader_host):
    """The role names its file to hostcheck (--set dataloader.path), which reads it as a part."""
    loader_host["spec"]["command"] += ["--set", "dataloader.path=/srv/loader.json"]
    path = loader_host["root"] / "srv" / "loader.json"
    tree(loader_host["root"], {"/srv/loader.json": json.dumps(settings())})
    changed = changed_parts(loader_host, lambda: path.write_text(json.dumps(settings())[:-1]))
    assert changed == ["the DataLoader settings file"]


WORKLOAD = dataloader_workload(VARIABLES, MEASURED_HOST)


def test_the_workload_the_variables_give_on_a_host():
    assert WORKLOAD == {
        "sample": "sleep",
        "sample_cost_us": 2000,
        "batch_size": 32,
        "step_time_s": 0.1,
        "ranks_per_node": 1,  # 0: one per GPU, 1 without
        "dataset_path": None,
        "max_workers": 4,  # 0: physical cores // ranks
    }
    eight = dataloader_workload(VARIABLES, {**MEASURED_HOST, "gpus": 8, "physical_cores": 64})
    assert (eight["ranks_per_node"], eight["max_workers"]) == (8, 8)
    given = {
        **VARIABLES,
        "hostcheck_dataloader_sample": "jpeg",
        "hostcheck_dataloader_ranks_per_node": "2",
        "hostcheck_dataloader_max_workers": 3,
        "hostcheck_dataloader_dataset_path": "/data/imagenet",
    }
    jpeg = dataloader_workload(given, MEASURED_HOST)
    assert jpeg["sample_cost_us"] is None  # not compared: jpeg measures real decoding
    assert (jpeg["ranks_per_node"], jpeg["max_workers"]) == (2, 3)
    assert jpeg["dataset_path"] == "/data/imagenet"


def test_settings_as_measured_for_this_workload_need_nothing():
    assert dataloader_reasons(found(), WORKLOAD, installing=False) == []
    # recorded numbers as JSON gives them (floats for whole numbers) still match
    floats = settings(workload={"sample_cost_us": 2000.0, "step_time_s": 0.1000000001})
    assert dataloader_reasons(found(floats), WORKLOAD, installing=False) == []
    # jpeg: the recorded sample cost is not the workload's
    jpeg = settings(workload={"sample": "jpeg", "sample_cost_us": 1})
    wanted = {**WORKLOAD, "sample": "jpeg", "sample_cost_us": None}
    assert dataloader_reasons(found(jpeg), wanted, False) == []


STALE = (
    f"measure again with hostcheck loop --sweep --write {PATH} (role variable "
    "hostcheck_dataloader_enabled)"
)


def test_a_missing_malformed_or_stale_file_is_measured_again():
    assert dataloader_reasons(found(None), WORKLOAD, False) == [f"{PATH} does not exist"]
    not_json = {"state": "malformed", "problem": "not valid JSON: x"}
    assert dataloader_reasons(
        found({"malformed": "not JSON: x"}, judged=not_json), WORKLOAD, False
    ) == [f"{PATH} is malformed: not valid JSON: x"]
    assert dataloader_reasons(found(settings(kind="mine")), WORKLOAD, False) == [
        f'{PATH} is malformed: kind: expected "hostcheck-dataloader-settings", got "mine"'
    ]
    assert dataloader_reasons(found(SETTINGS, hostname="node2"), WORKLOAD, False) == [
        f"{PATH} is stale: measured on node1 with 8 CPUs, this is node2 with 8 CPUs: {STALE}"
    ]
    assert dataloader_reasons(found(SETTINGS, cpus=16), WORKLOAD, False) == [
        f"{PATH} is stale: measured on node1 with 8 CPUs, this is node1 with 16 CPUs: {STALE}"
    ]
    assert dataloader_reasons(found(), WORKLOAD, installing=True) == [
        f"hostcheck is (re)installed since {PATH} was measured"
    ]


def test_before_hostcheck_is_installed_the_file_cannot_be_judged():
    """The first run (or check mode before it): no hostcheck in the venv to ask, so the file is
    measured again after the install, whatever it holds."""
    nobody = {"state": "unjudged", "problem": "hostcheck is not installed in /opt/venvs/train"}
    assert dataloader_reasons(found(judged=nobody), WORKLOAD, installing=True) == [
        f"{PATH} cannot be judged: hostcheck is not installed in /opt/venvs/train"
    ]


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({"schema_version": 2}, "schema_version 2 is not supported (this hostcheck reads "),
        ({"workload": None}, "workload: expected an object, got null"),
        ({"host": []}, "host: expected an object, got an array"),
        ({"dataloader": {"num_workers": -1}}, "dataloader.num_workers: expected an integer >= 0"),
        ({"dataloader": {"num_workers": True}}, "dataloader.num_workers: expected an integer >= "),
        ({"dataloader": {"pin_memory": "yes"}}, "dataloader.pin_memory: expected true or false, "),
        ({"dataloader": {"prefetch_factor": 0}}, "dataloader.prefetch_factor: expected an integer"),
        # the role's own copy of the rules took this file; training code refuses it
        (
            {"dataloader": {"num_workers": 0, "prefetch_factor": None}},
            "dataloader.persistent_workers: expected false when num_workers is 0, got true",
        ),
    ],
)
def test_what_makes_a_settings_file_malformed_is_hostchecks_rule(broken, said):
    (reason,) = dataloader_reasons(found(settings(**broken)), WORKLOAD, False)
    assert reason.startswith(f"{PATH} is malformed: {said}")
    idle = settings(
        dataloader={"num_workers": 0, "prefetch_factor": None, "persistent_workers": False}
    )
    assert dataloader_reasons(found(idle), WORKLOAD, False) == []


@pytest.mark.parametrize(
    ("variable", "value", "recorded", "given"),
    [
        ("batch_size", 64, "batch_size 32", "64"),
        ("sample", "busy", 'sample "sleep"', '"busy"'),
        ("sample_cost_us", 500, "sample_cost_us 2000.0", "500"),
        ("step_ms", 250, "step_time_s 0.1", "0.25"),
        ("ranks_per_node", 2, "ranks_per_node 1", "2"),
        ("max_workers", 2, "max_workers 4", "2"),
        ("dataset_path", "/data", "dataset_path null", '"/data"'),
    ],
)
def test_each_workload_variable_that_differs_is_named(variable, value, recorded, given):
    name = f"hostcheck_dataloader_{variable}"
    changed = {**VARIABLES, "hostcheck_dataloader_max_workers": 4, name: value}
    workload = dataloader_workload(changed, MEASURED_HOST)
    assert dataloader_reasons(found(), workload, False) == [
        f"{PATH} records {recorded}, {name} gives {given}"
    ]


def test_switched_off_only_the_roles_own_file_is_removed():
    assert dataloader_reasons(found(), None, False) == [
        f"hostcheck_dataloader_enabled is false: {PATH} (written by hostcheck loop --sweep "
        "--write) is removed"
    ]
    assert dataloader_reasons(found(None), None, False) == []
    assert dataloader_reasons(found(settings(kind="mine")), None, False) == []
    assert dataloader_reasons(found({"malformed": "not JSON"}), None, False) == []
    assert dataloader_reasons(None, WORKLOAD, True) == []  # not read: an older probe spec


def test_the_sweep_command_line():
    bin_ = "/opt/venvs/train/bin/hostcheck"
    options = ["--profile", "default", "--config", "/etc/hostcheck/config.yaml"]
    assert sweep_argv(bin_, options, PATH, WORKLOAD, 0.3) == [
        *(bin_, "loop", "--sweep", "--write", PATH, *options),
        *("--ranks", "1", "--sample", "sleep", "--sample-cost-us", "2000"),
        *("--batch-size", "32", "--step-ms", "100", "--seconds", "0.3", "--max-workers", "4"),
    ]
    jpeg = {**WORKLOAD, "sample": "jpeg", "sample_cost_us": None, "dataset_path": "/data"}
    argv = sweep_argv(bin_, [], PATH, jpeg, 2.0)
    assert "--sample-cost-us" not in argv and argv[-2:] == ["--dataset-path", "/data"]
    assert argv[argv.index("--seconds") + 1] == "2"


def test_the_message_says_why_the_settings_file_is_measured_or_removed():
    plan = {"install": [], "config": [], "timer": [], "dataloader": [f"{PATH} does not exist"]}
    why = "this run measures the DataLoader settings file"
    plan["run"] = run_reasons("changed", True, [], why)
    assert plan_message(plan, True, "/v", "x") == (
        f"dataloader: {PATH} does not exist | hostcheck runs: {why}"
    )
