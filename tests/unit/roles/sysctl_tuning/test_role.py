"""The sysctl_tuning role off the sandbox: its filters, its read-only probe against fixture
trees standing in for /, and the boot-time files it writes on each OS family (rendered from
the per-OS vars; the RHEL and Ubuntu paths cannot run here)."""

from __future__ import annotations

import configparser
import os
import shutil
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import sysctl_tuning_probe as probe
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    sysctl_tuning_parse_file,
    sysctl_tuning_same,
    sysctl_tuning_settings,
    sysctl_tuning_todo,
)

from tests.paths import CHECKOUT as REPO
from tests.support.systemd_units import verify_unit

ROLE = REPO / "roles" / "sysctl_tuning"

OWN = "/etc/sysctl.d/90-hostcheck-training.conf"
BOOT_ID = "b055b832-9245-46fe-a3d9-c0a8a52c6a23"


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


# ---------------------------------------------------------------- settings filter


def test_defaults_normalise_and_match_the_hostcheck_profiles():
    wanted = sysctl_tuning_settings(defaults()["sysctl_tuning_settings"])
    assert wanted["net.ipv4.tcp_rmem"] == "4096 131072 16777216"
    assert wanted["vm.swappiness"] == "10"
    for name in ("vm.swappiness", "vm.max_map_count", "fs.file-max", "fs.nr_open"):
        assert name in wanted
    profiles = {
        name: yaml.safe_load((REPO / "hostcheck" / "profiles" / f"{name}.yaml").read_text())
        for name in ("default", "gpu-node")
    }
    expect = {
        **profiles["default"]["checks"]["sysctl"]["expect"],
        **profiles["gpu-node"]["checks"]["sysctl"]["expect"],
    }
    for name, rule in expect.items():
        if name not in wanted:
            continue
        fields = [int(f) for f in wanted[name].split()]
        for kind, bound in rule.items():
            bounds = bound if isinstance(bound, list) else [bound]
            for have, want in zip(fields, bounds):
                if want is None:
                    continue
                assert {"min": have >= want, "max": have <= want, "equals": have == want}[kind], (
                    name,
                    kind,
                    want,
                )
    cpu = profiles["default"]["checks"]["cpu"]
    memory = profiles["default"]["checks"]["memory"]
    assert defaults()["sysctl_tuning_cpu_governor"] == cpu["governor"]
    assert defaults()["sysctl_tuning_thp_enabled"] in memory["thp_enabled"]
    assert defaults()["sysctl_tuning_thp_defrag"] in memory["thp_defrag"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10, "10"),
        (-1, "-1"),
        ("  4096\t131072   16777216 ", "4096 131072 16777216"),
        ([4096, "131072", 16777216], "4096 131072 16777216"),
        ("bbr", "bbr"),
    ],
)
def test_values_are_written_as_the_kernel_prints_them(value, text):
    assert sysctl_tuning_settings({"net.x": value}) == {"net.x": text}


def test_null_leaves_a_name_out():
    assert sysctl_tuning_settings({"vm.swappiness": None, "fs.nr_open": 1}) == {"fs.nr_open": "1"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vm/swappiness": 1}, "['vm/swappiness']: not a sysctl name"),
        ({"swappiness": 1}, "['swappiness']: not a sysctl name"),
        ({"vm..swappiness": 1}, "not a sysctl name"),
        ({"vm.swappiness ": 1}, "not a sysctl name"),
        ({"Vm.swappiness": 1}, "not a sysctl name"),
        ({"../etc.passwd": 1}, "not a sysctl name"),
        ({"vm.swappiness": True}, "['vm.swappiness']: a boolean; write 1 or 0"),
        ({"vm.swappiness": 1.5}, "not an integer"),
        ({"vm.swappiness": ""}, "empty"),
        ({"vm.swappiness": []}, "an empty list"),
        ({"vm.swappiness": "1\nkernel.x=1"}, "more than one line"),
        ({"vm.swappiness": {"a": 1}}, "a dict"),
        ({"vm.swappiness": [1, "a b"]}, "one word per field"),
    ],
)
def test_bad_settings_name_the_variable_and_key(settings, message):
    with pytest.raises(AnsibleFilterError) as error:
        sysctl_tuning_settings(settings, "sysctl_tuning_settings")
    assert str(error.value).startswith("sysctl_tuning_settings")
    assert message in str(error.value)


def test_not_a_mapping():
    with pytest.raises(AnsibleFilterError, match=r"^sysctl_tuning_settings: expected a mapping"):
        sysctl_tuning_settings(["vm.swappiness=10"], "sysctl_tuning_settings")


def test_every_bad_key_is_reported_at_once():
    with pytest.raises(AnsibleFilterError) as error:
        sysctl_tuning_settings({"a/b": 1, "vm.swappiness": True, "fs.nr_open": 1}, "s")
    assert "s['a/b']" in str(error.value) and "s['vm.swappiness']" in str(error.value)


HOST = {
    "vm.swappiness": {"exists": True, "writable": True, "value": "60"},
    "net.ipv4.tcp_rmem": {"exists": True, "writable": True, "value": "4096 131072 6291456"},
    "net.ipv4.tcp_congestion_control": {"exists": True, "writable": True, "value": "cubic"},
    "kernel.random.boot_id": {"exists": True, "writable": False, "value": BOOT_ID},
    "vm.nosuch": {"exists": False, "writable": False, "value": None},
}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vm.nosuch": 1}, "not a sysctl of this host's kernel"),
        ({"vm.swappiness": "ten"}, "expected an integer, as it has now ('60')"),
        ({"vm.swappiness": "010"}, "expected an integer"),  # the kernel would read octal
        ({"vm.swappiness": "0x10"}, "expected an integer"),
        ({"net.ipv4.tcp_rmem": 16777216}, "expected 3 integers"),
        ({"net.ipv4.tcp_rmem": "4096 131072 16M"}, "expected 3 integers"),
        ({"kernel.random.boot_id": "x"}, "a read-only sysctl"),
    ],
)
def test_settings_against_the_host_kernel(settings, message):
    with pytest.raises(AnsibleFilterError, match=r"^sysctl_tuning_settings\["):
        sysctl_tuning_settings(settings, "sysctl_tuning_settings", HOST)
    with pytest.raises(AnsibleFilterError) as error:
        sysctl_tuning_settings(settings, "sysctl_tuning_settings", HOST)
    assert message in str(error.value)


def test_good_settings_against_the_host_kernel():
    good = {
        "vm.swappiness": 10,
        "net.ipv4.tcp_rmem": [4096, 131072, 16777216],
        "net.ipv4.tcp_congestion_control": "bbr",
    }
    assert sysctl_tuning_settings(good, "s", HOST)["net.ipv4.tcp_congestion_control"] == "bbr"


def test_parse_file_and_same():
    text = (
        "# header\n\nvm.swappiness=10\n; old\n-net.ipv4.tcp_rmem = 4096\t1  2\nvm.swappiness = 5\n"
    )
    assert sysctl_tuning_parse_file(text) == {"vm.swappiness": "5", "net.ipv4.tcp_rmem": "4096 1 2"}
    assert sysctl_tuning_parse_file(None) == {}
    assert sysctl_tuning_same("4096\t1 2", "4096 1  2")
    assert not sysctl_tuning_same(None, "1")
    assert not sysctl_tuning_same("1 2", "1")


def test_todo_skips_what_is_right_in_the_file_and_where_set_live_in_the_kernel():
    wanted = {"vm.swappiness": "10", "net.ipv4.tcp_rmem": "4096 131072 16777216"}
    text = "vm.swappiness=10\nnet.ipv4.tcp_rmem=4096 131072 6291456\n"
    assert sysctl_tuning_todo(wanted, None) == [
        {"key": "vm.swappiness", "value": "10"},
        {"key": "net.ipv4.tcp_rmem", "value": "4096 131072 16777216"},
    ]
    assert sysctl_tuning_todo(wanted, text) == [
        {"key": "net.ipv4.tcp_rmem", "value": "4096 131072 16777216"}
    ]
    live = {
        "vm.swappiness": {"value": "60"},
        "net.ipv4.tcp_rmem": {"value": "4096\t131072\t16777216"},
    }
    right_file = "vm.swappiness=10\nnet.ipv4.tcp_rmem=4096 131072 16777216\n"
    assert sysctl_tuning_todo(wanted, right_file) == []
    assert sysctl_tuning_todo(wanted, right_file, live) == [{"key": "vm.swappiness", "value": "10"}]


# ---------------------------------------------------------------- probe


class Root:
    """A fixture tree standing in for a host's /."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def file(self, name: str, text: str, mode: int = 0o644) -> None:
        target = self.path / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def link(self, name: str, to: str) -> None:
        target = self.path / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(to, target)

    @property
    def root(self) -> str:
        return str(self.path)


@pytest.fixture
def host(tmp_path):
    """A bare-metal host with systemd: own boot_id, PID 1 systemd."""
    r = Root(tmp_path)
    r.file("/proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555\n", 0o444)
    r.link("/proc/self/ns/pid", "pid:[4026531836]")
    r.link("/proc/self/ns/mnt", "pid:[4026531840]")
    r.file("/proc/1/comm", "systemd\n")
    r.file("/proc/1/environ", "HOME=/\0TERM=linux\0")
    r.file("/proc/sys/vm/swappiness", "60\n")
    r.file("/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
    r.file("/proc/sys/net/ipv4/conf/eth0.100/rp_filter", "1\n")
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    (tmp_path / "sys").mkdir()
    return r


def no_virt():
    return None


def run(r: Root, names=(), boot_id="", ns="", files=()) -> dict:
    params = {
        "names": list(names),
        "controller_boot_id": boot_id,
        "controller_namespaces": ns,
        "own_file": OWN,
        "files": list(files),
    }
    return probe.probe(params, root=r.root, detect_virt=no_virt)


def test_a_host_of_its_own_is_not_shared(host):
    found = run(host, boot_id=BOOT_ID, ns="pid:[1] mnt:[2]")
    assert found["shared"] == []
    assert found["live_sysctl_blockers"] == [] and found["live_sys_blockers"] == []
    assert found["systemd"] is True


def test_the_controllers_boot_id_in_other_namespaces_is_a_shared_kernel(host):
    host_boot = "11111111-2222-3333-4444-555555555555"
    found = run(host, boot_id=host_boot + "\n", ns="pid:[9] mnt:[9]")
    assert len(found["shared"]) == 1
    assert f"boot_id {host_boot} equals the controller's" in found["shared"][0]
    assert found["live_sysctl_blockers"] == found["shared"]


def test_the_controller_itself_is_not_shared(host):
    """ansible_connection=local (ansible-pull): same boot and same namespaces."""
    found = run(
        host, boot_id="11111111-2222-3333-4444-555555555555", ns=probe.namespaces(host.root)
    )
    assert found["shared"] == []


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda r: r.file("/.dockerenv", ""), "/.dockerenv exists"),
        (lambda r: r.file("/run/.containerenv", ""), "/run/.containerenv exists"),
        (lambda r: r.file("/run/systemd/container", "lxc\n"), "/run/systemd/container says lxc"),
        (
            lambda r: r.file("/proc/1/environ", "container=podman\0"),
            "PID 1 runs with container=podman",
        ),
        (lambda r: r.file("/proc/1/comm", "tini\n"), "PID 1 is tini, not an init system"),
        (lambda r: r.file("/proc/1/comm", "python3\n"), "PID 1 is python3"),
    ],
)
def test_container_markers(host, setup, reason):
    setup(host)
    found = run(host)
    assert any(reason in r for r in found["shared"]), found["shared"]
    assert found["live_sys_blockers"] == found["shared"]


def test_read_only_proc_sys_and_sys_block_live_changes_only(host, monkeypatch):
    """A read-only /proc/sys or /sys (as in the sandbox) is no container marker by itself:
    it blocks the live changes it concerns, not the kernel's ownership."""
    real = os.statvfs

    class ReadOnly:
        f_flag = os.ST_RDONLY

    def statvfs(path):
        return ReadOnly() if path == host.root + "/proc/sys" else real(path)

    monkeypatch.setattr(probe.os, "statvfs", statvfs)
    found = run(host)
    assert found["shared"] == []
    assert found["live_sysctl_blockers"] == ["/proc/sys is read-only"]
    assert found["live_sys_blockers"] == []


def test_systemd_detect_virt(host):
    params = {"names": [], "controller_boot_id": "", "controller_namespaces": "", "own_file": OWN}
    found = probe.probe({**params, "files": []}, root=host.root, detect_virt=lambda: "docker")
    assert found["shared"] == ["systemd-detect-virt --container says docker"]


def test_sysctl_values_modes_and_slash_names(host):
    found = run(
        host, names=["vm.swappiness", "net.ipv4.tcp_rmem", "net.ipv4.conf.eth0/100.rp_filter"]
    )
    sysctl = found["sysctl"]
    assert sysctl["vm.swappiness"] == {
        "exists": True,
        "writable": True,
        "value": "60",
        "boot": None,
        "set_by": [],
        "overridden_by": [],
    }
    assert sysctl["net.ipv4.tcp_rmem"]["value"] == "4096 131072 6291456"
    assert sysctl["net.ipv4.conf.eth0/100.rp_filter"]["value"] == "1"
    missing = run(host, names=["vm.nosuch", "kernel.random.boot_id"])["sysctl"]
    assert missing["vm.nosuch"]["exists"] is False
    assert missing["kernel.random.boot_id"]["writable"] is False


def test_boot_order_finds_what_overrides_our_file(host):
    """Files are read by name across /etc, /run, /usr/lib (first folder wins a name), then
    /etc/sysctl.conf; a glob or slash key counts too; a file masked by /dev/null does not."""
    host.file(OWN, "vm.swappiness=10\nnet.ipv4.tcp_rmem=4096 131072 16777216\n")
    host.file("/usr/lib/sysctl.d/50-default.conf", "vm.swappiness = 30\n")
    host.file("/usr/lib/sysctl.d/95-vendor.conf", "vm.swappiness = 40\n")
    host.link("/etc/sysctl.d/95-vendor.conf", "/dev/null")  # masked
    host.file("/run/sysctl.d/99-cloud.conf", "net/ipv4/tcp_rmem = 4096 87380 6291456\n")
    host.file("/etc/sysctl.conf", "-vm.swapp*ness=60\n")
    found = run(host, names=["vm.swappiness", "net.ipv4.tcp_rmem"])["sysctl"]
    swap = found["vm.swappiness"]
    assert swap["set_by"] == [
        ["/usr/lib/sysctl.d/50-default.conf", "30"],
        [OWN, "10"],
        ["/etc/sysctl.conf", "60"],
    ]
    assert swap["boot"] == {"file": "/etc/sysctl.conf", "value": "60"}
    assert swap["overridden_by"] == [["/etc/sysctl.conf", "60"]]
    rmem = found["net.ipv4.tcp_rmem"]
    assert rmem["overridden_by"] == [["/run/sysctl.d/99-cloud.conf", "4096 87380 6291456"]]


def test_later_files_count_before_our_file_exists(host):
    host.file("/etc/sysctl.d/99-sysctl.conf", "vm.swappiness=60\n")
    host.file("/etc/sysctl.d/10-early.conf", "vm.swappiness=1\n")
    swap = run(host, names=["vm.swappiness"])["sysctl"]["vm.swappiness"]
    assert swap["overridden_by"] == [["/etc/sysctl.d/99-sysctl.conf", "60"]]


def test_sysctl_conf_read_once_through_the_distros_link(host):
    host.file("/etc/sysctl.conf", "vm.swappiness=60\n")
    host.link("/etc/sysctl.d/99-sysctl.conf", "../sysctl.conf")
    swap = run(host, names=["vm.swappiness"])["sysctl"]["vm.swappiness"]
    assert swap["set_by"] == [["/etc/sysctl.d/99-sysctl.conf", "60"]]


def test_cpufreq_and_thp(host):
    for cpu, gov in (("cpu0", "powersave"), ("cpu1", "performance")):
        host.file(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor", gov + "\n")
        host.file(
            f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_available_governors",
            "performance powersave\n" if cpu == "cpu0" else "performance powersave schedutil\n",
        )
    host.file("/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    host.file(
        "/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never\n"
    )
    found = run(host)
    assert found["cpufreq"] == {
        "present": True,
        "governors": {"cpu0": "powersave", "cpu1": "performance"},
        "available": ["performance", "powersave"],
        "paths": [
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        ],
    }
    assert found["thp"]["enabled"] == {
        "selected": "madvise",
        "options": ["always", "madvise", "never"],
    }
    assert found["thp"]["defrag"]["options"][2] == "defer+madvise"


def test_no_cpufreq_no_thp(host):
    found = run(host)
    assert found["cpufreq"]["present"] is False and found["cpufreq"]["available"] is None
    assert found["thp"] == {"present": False, "enabled": None, "defrag": None}


def test_files_read_back(host):
    host.file("/etc/tuned/active_profile", "hostcheck-training\n")
    found = run(host, files=[OWN, "/etc/motd"])
    host.file(OWN, "vm.swappiness=10\n")
    again = run(host, files=[OWN])
    assert found["files"] == {OWN: None, "/etc/motd": None}
    assert again["files"][OWN] == "vm.swappiness=10\n"
    assert again["tuned_active_profile"] == "hostcheck-training"


def test_modes_and_owners_of_the_role_files(host):
    host.file("/etc/systemd/system/hostcheck-thp.service", "[Unit]\n", 0o600)
    (host.path / "etc/tuned/hostcheck-training").mkdir(parents=True)
    params = {
        "names": [],
        "controller_boot_id": "",
        "controller_namespaces": "",
        "own_file": OWN,
        "files": [],
        "stat": ["/etc/systemd/system/hostcheck-thp.service", "/etc/tuned/hostcheck-training", OWN],
    }
    found = probe.probe(params, root=host.root, detect_virt=no_virt)["stat"]
    me = os.getuid(), os.getgid()
    unit = found["/etc/systemd/system/hostcheck-thp.service"]
    assert unit == {"mode": "0600", "uid": me[0], "gid": me[1], "directory": False}
    assert found["/etc/tuned/hostcheck-training"]["directory"] is True
    assert found[OWN] is None


SHOWN = """LoadState=loaded
ActiveState=active
UnitFileState=enabled

LoadState=not-found
ActiveState=inactive
UnitFileState=
"""


def test_unit_states_from_systemctl_show():
    asked = []

    def show(names):
        asked.append(names)
        return SHOWN

    names = ["hostcheck-thp.service", "tuned.service"]
    assert probe.unit_states(names, True, show) == {
        "hostcheck-thp.service": {
            "LoadState": "loaded",
            "ActiveState": "active",
            "UnitFileState": "enabled",
        },
        "tuned.service": {"LoadState": "not-found", "ActiveState": "inactive", "UnitFileState": ""},
    }
    assert asked == [names]
    # without systemd, or when systemctl answers for fewer units than asked: nothing known
    assert probe.unit_states(names, False, show) == {}
    assert probe.unit_states([*names, "x.service"], True, show) == {}
    assert probe.unit_states([], True, show) == {}


def test_probe_on_this_machine_reads_and_changes_nothing():
    """The probe against the real / of this machine (the controller): no kernel is shared
    with itself; the values it reads are the kernel's."""
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    params = {
        "names": ["vm.swappiness"],
        "controller_boot_id": boot_id,
        "controller_namespaces": probe.namespaces(),
        "own_file": OWN,
        "files": [],
    }
    found = probe.probe(params)
    assert not any("boot_id" in r for r in found["shared"])
    assert (
        found["sysctl"]["vm.swappiness"]["value"]
        == Path("/proc/sys/vm/swappiness").read_text().strip()
    )


# ---------------------------------------------------------------- per-OS boot files


def role_vars(family_file: str) -> dict:
    data = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    data.update(yaml.safe_load((ROLE / "vars" / family_file).read_text()))
    data.update(defaults())
    data["ansible_managed"] = "Ansible managed"
    return data


def render(template: str, variables: dict) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROLE / "templates")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
    )
    text = env.get_template(template).render(**variables)
    # templated vars (e.g. __sysctl_tuning_thp_dir) are plain strings here
    assert "{{" not in text
    return text


@pytest.mark.parametrize("family", ["Debian.yml", "Ubuntu.yml", "RedHat.yml"])
def test_per_os_vars_define_the_same_keys(family):
    keys = set(yaml.safe_load((ROLE / "vars" / family).read_text()))
    assert {"__sysctl_tuning_boot_method", "__sysctl_tuning_packages"} <= keys
    assert "__sysctl_tuning_governor_after" in keys


def tuned_merge(parent: str, child: str) -> dict[str, dict[str, str]]:
    """tuned's merge of an included profile (tuned/profiles/merger.py): a section of the
    child updates the parent's, or replaces it when it says replace=true."""
    merged: dict[str, dict[str, str]] = {}
    for text in (parent, child):
        config = configparser.ConfigParser(interpolation=None)
        config.optionxform = str
        config.read_string(text)
        for section in config.sections():
            options = dict(config[section])
            if options.pop("replace", "false") in ("true", "True") or section not in merged:
                merged[section] = options
            else:
                merged[section].update(options)
    return merged


# [cpu] and [vm] of EL9's throughput-performance, the profile the role includes by default.
THROUGHPUT_PERFORMANCE = """
[main]
summary=Broadly applicable tuning
[cpu]
governor=performance
energy_perf_bias=performance
min_perf_pct=100
[vm]
transparent_hugepages=always
"""


def test_tuned_profile_rhel_defaults():
    variables = role_vars("RedHat.yml")
    text = render("tuned.conf.j2", variables)
    config = configparser.ConfigParser(interpolation=None)
    config.optionxform = str
    config.read_string(text)
    assert config["main"]["include"] == "throughput-performance"
    merged = tuned_merge(THROUGHPUT_PERFORMANCE, text)
    assert merged["cpu"]["governor"] == "performance"
    assert merged["vm"]["transparent_hugepages"] == "madvise"
    assert merged["sysfs"] == {"/sys/kernel/mm/transparent_hugepage/defrag": "madvise"}


def test_tuned_profile_null_governor_leaves_the_cpu_alone():
    variables = {
        **role_vars("RedHat.yml"),
        "sysctl_tuning_cpu_governor": None,
        "sysctl_tuning_thp_defrag": None,
        "sysctl_tuning_thp_enabled": "never",
    }
    merged = tuned_merge(THROUGHPUT_PERFORMANCE, render("tuned.conf.j2", variables))
    assert merged["cpu"] == {}
    assert merged["vm"]["transparent_hugepages"] == "never"
    assert "sysfs" not in merged


def test_tuned_profile_without_parent():
    variables = {**role_vars("RedHat.yml"), "sysctl_tuning_tuned_include": ""}
    assert "include=" not in render("tuned.conf.j2", variables)


@pytest.mark.parametrize("family", ["Debian.yml", "Ubuntu.yml"])
def test_systemd_units(family, tmp_path):
    variables = role_vars(family)
    governor = render("hostcheck-cpu-governor.service.j2", variables)
    thp = render("hostcheck-thp.service.j2", variables)
    assert 'echo performance > "$f"' in governor
    assert ("After=ondemand.service" in governor) == (family == "Ubuntu.yml")
    assert "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled" in thp
    assert "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag" in thp
    only_defrag = render(
        "hostcheck-thp.service.j2", {**variables, "sysctl_tuning_thp_enabled": None}
    )
    assert "/enabled'" not in only_defrag and "/defrag'" in only_defrag
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    for name, text in (
        ("hostcheck-cpu-governor.service", governor),
        ("hostcheck-thp.service", thp),
    ):
        unit = tmp_path / name
        unit.write_text(text)
        problems = verify_unit(unit)
        # complaints about other units (ondemand.service is Ubuntu's) are not the role's
        assert [p for p in problems if name in p and "ondemand.service" not in p] == []
