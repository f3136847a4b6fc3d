"""Sysctl names, sysctl.d files, cpufreq governors and THP modes have one home
(plugins/module_utils/sysctl.py, cpus.py and thp.py, the package's hostcheck._shared): hostcheck's
sysctl, cpu and memory checks, the sysctl_tuning role's probe, filters and actions, and the
hostcheck role's probe read them the same way, edge cases included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import sysctl, thp
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import sysctl_tuning_probe
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    sysctl_tuning_parse_file,
)
from hypothesis import given
from hypothesis import strategies as st

from hostcheck import state as state_module
from hostcheck.checks import cpu
from hostcheck.checks import sysctl as sysctl_check
from hostcheck.system import System
from tests.support.cpu_host import (
    SWAPS_HEADER,
    build_cpus,
    cpu_config,
    finding,
    meminfo,
    memory_config,
)


def test_the_modules_and_the_package_use_one_file():
    from hostcheck._shared import sysctl as packaged_sysctl
    from hostcheck._shared import thp as packaged_thp

    assert Path(packaged_sysctl.__file__).resolve() == Path(sysctl.__file__).resolve()
    assert Path(packaged_thp.__file__).resolve() == Path(thp.__file__).resolve()
    assert sysctl_check.NAME_PATTERN == sysctl.NAME_PATTERN


# ---------------------------------------------------------------- sysctl.d files

FILE = """\
# comment
  ; indented comment
no assignment here

vm.swappiness=10
 -net.ipv4.tcp_rmem   =  4096\t131072   6291456
-  kernel.panic = 5
net/ipv4/conf/eth0.100/rp_filter = 2
vm.swappiness = 1
kernel.modprobe = /sbin/mod probe
"""


def test_sysctl_d_lines_as_sysctl_d_5_reads_them():
    """# and ; start comments, a line without = is skipped, whitespace around key and value
    goes, a leading '-' (ignore errors) is dropped, fields are joined by one space."""
    assert sysctl.sysctl_file_lines(FILE) == [
        ("vm.swappiness", "10"),
        ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
        ("kernel.panic", "5"),
        ("net/ipv4/conf/eth0.100/rp_filter", "2"),
        ("vm.swappiness", "1"),
        ("kernel.modprobe", "/sbin/mod probe"),
    ]
    assert sysctl.sysctl_file_lines(None) == sysctl.sysctl_file_lines("") == []


def test_the_probe_reads_names_dotted_the_role_reads_keys_as_written():
    """systemd-sysctl sets net/ipv4/conf/eth0.100/rp_filter as net.ipv4.conf.eth0/100.rp_filter;
    the role's filter keeps the key as written, because its tasks hand the keys back to
    ansible.posix.sysctl, which finds a line by its key as written. The last line wins."""
    assert dict(sysctl.sysctl_file_settings(FILE))["net.ipv4.conf.eth0/100.rp_filter"] == "2"
    assert sysctl_tuning_parse_file(FILE) == {
        "vm.swappiness": "1",
        "net.ipv4.tcp_rmem": "4096 131072 6291456",
        "kernel.panic": "5",
        "net/ipv4/conf/eth0.100/rp_filter": "2",
        "kernel.modprobe": "/sbin/mod probe",
    }


DOTTED_LINE = st.tuples(
    st.from_regex(r"[a-z]{1,5}\.[a-z_]{1,8}(\.[a-z0-9]{1,4})?", fullmatch=True),
    st.lists(st.sampled_from(["1", "4096", "bbr", "-1"]), min_size=1, max_size=3),
    st.sampled_from(["=", " = ", "\t=  "]),
    st.sampled_from(["", "-", " "]),
)


@given(st.lists(DOTTED_LINE | st.sampled_from(["# x", "; y", "", "junk"]), max_size=12))
def test_the_probe_and_the_role_agree_on_dotted_files(lines):
    text = "\n".join(
        line if isinstance(line, str) else f"{line[3]}{line[0]}{line[2]}{' '.join(line[1])}"
        for line in lines
    )
    assert dict(sysctl.sysctl_file_settings(text)) == sysctl_tuning_parse_file(text)


# ---------------------------------------------------------------- names and /proc/sys paths


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("vm.swappiness", "/proc/sys/vm/swappiness"),
        ("vm/swappiness", "/proc/sys/vm/swappiness"),
        ("net.ipv4.conf.eth0/100.rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"),
        ("net/ipv4/conf/eth0.100/rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"),
        ("net.ipv4.conf.br+0.forwarding", "/proc/sys/net/ipv4/conf/br+0/forwarding"),
        ("net.ipv6.conf.wg@1.disable_ipv6", "/proc/sys/net/ipv6/conf/wg@1/disable_ipv6"),
    ],
)
def test_proc_path_of_either_spelling(name, path):
    assert sysctl.proc_path(name) == path
    assert sysctl.dotted(name) == sysctl.dotted(sysctl.dotted(name))


@pytest.mark.parametrize("name", ["a.//.b", "vm./..", "vm", "../etc/passwd", "vm.swap piness"])
def test_proc_path_refuses_what_would_leave_proc_sys(name):
    """a.//.b would be /proc/sys/a/../b by swapping alone (the role's probe did that)."""
    with pytest.raises(ValueError, match="not a sysctl name"):
        sysctl.proc_path(name)


ROLE_NAME = st.from_regex(sysctl.DOTTED_NAME_PATTERN, fullmatch=True).filter(
    lambda name: "\n" not in name
)


@given(ROLE_NAME)
def test_every_name_the_role_takes_hostcheck_checks_at_the_same_path(name):
    """Every name sysctl_tuning_settings accepts is a name of hostcheck's profiles, read from
    the file the role's probe always read (dots and slashes swapped)."""
    assert re.match(sysctl.NAME_PATTERN, name)
    assert sysctl.proc_path(name) == "/proc/sys/" + name.translate(str.maketrans("./", "/."))


def test_the_role_takes_dotted_names_only():
    assert re.match(sysctl.DOTTED_NAME_PATTERN, "net.ipv4.conf.eth0/100.rp_filter")
    assert not re.match(sysctl.DOTTED_NAME_PATTERN, "vm/swappiness")
    assert re.match(sysctl.NAME_PATTERN, "vm/swappiness")


def test_the_probe_the_host_state_and_the_check_read_the_same_file(fake_host):
    """The host state (hostcheck/state.py) and the sysctl_tuning probe read
    net.ipv4.conf.eth0/100.rp_filter from the file the sysctl check reads, not .../eth0/100/...
    as hostcheck_probe once did."""
    fake_host.file("/proc/sys/net/ipv4/conf/eth0.100/rp_filter", "2\n")
    names = ["net.ipv4.conf.eth0/100.rp_filter", "net/ipv4/conf/eth0.100/rp_filter", "a.//.b"]
    root = str(fake_host.root)
    assert state_module.sysctl_values(System(root=root), names) == {
        "a.//.b": None,
        "net.ipv4.conf.eth0/100.rp_filter": "2",
        "net/ipv4/conf/eth0.100/rp_filter": "2",
    }
    state = sysctl_tuning_probe.sysctl_state(names, "/etc/sysctl.d/90-x.conf", root)
    assert [state[name]["value"] for name in names] == ["2", "2", None]
    assert state["a.//.b"]["exists"] is False
    finding_, measured = sysctl_check.check_one(fake_host.context({}), names[0], {})
    assert measured == 2 and finding_.source == "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"


# ---------------------------------------------------------------- cpufreq and THP


def test_the_cpu_check_and_the_probe_see_the_same_governors(fake_host):
    build_cpus(fake_host, sockets=1, cores=6, threads=2, governor="powersave")
    base = "/sys/devices/system/cpu"
    fake_host.file(f"{base}/cpu10/cpufreq/scaling_governor", "performance\n")
    fake_host.file(f"{base}/cpu11/cpufreq/scaling_governor", "\n")  # no governor: left out
    checked = cpu.run_cpu(fake_host.context(cpu_config())).data["governors"]
    probed = sysctl_tuning_probe.cpufreq_state(str(fake_host.root))["governors"]
    assert {f"cpu{number}": governor for number, governor in checked.items()} == probed
    assert len(probed) == 11 and probed["cpu10"] == "performance" and "cpu11" not in probed


@pytest.mark.parametrize(
    ("text", "selected", "options"),
    [
        ("always [madvise] never\n", "madvise", ["always", "madvise", "never"]),
        ("always defer defer+madvise [madvise] never", "madvise", None),
        ("[always] [never]", "always", ["always", "never"]),
        ("[] never", None, ["[]", "never"]),
        ("[a b] c", None, ["[a", "b]", "c"]),  # the probe's pattern took "a b"
        ("x[y] z", None, ["x[y]", "z"]),  # and "y" here
    ],
)
def test_the_memory_check_and_the_probe_read_thp_modes_alike(fake_host, text, selected, options):
    fake_host.file("/proc/meminfo", meminfo(64 * 2**20))
    fake_host.file("/proc/swaps", SWAPS_HEADER)
    fake_host.file(f"{thp.THP_DIR}/enabled", text)
    fake_host.file(f"{thp.THP_DIR}/defrag", "[madvise] never\n")
    probed = sysctl_tuning_probe.thp_state(str(fake_host.root))["enabled"]
    assert probed["selected"] == selected
    assert probed["options"] == (options or text.replace("[", "").replace("]", "").split())
    checked = finding(cpu.run_memory(fake_host.context(memory_config())), "thp enabled")
    assert checked.measured == (selected if selected is not None else text.strip())
