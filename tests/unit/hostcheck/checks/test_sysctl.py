from __future__ import annotations

import posixpath
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostcheck import config as c
from hostcheck.checks import sysctl
from hostcheck.checks.base import CheckContext
from hostcheck.model import Status
from hostcheck.system import System

# The sections proposed for the shipped profiles (see the report); validated below.
DEFAULT_EXPECT = {
    "vm.swappiness": {"max": 10},
    "vm.max_map_count": {"min": 262144},
    "vm.overcommit_memory": {"max": 1},
    "vm.zone_reclaim_mode": {"equals": 0},
    "fs.file-max": {"min": 1048576},
    "fs.nr_open": {"min": 1048576},
    "net.core.somaxconn": {"min": 4096},
    "net.core.rmem_max": {},
    "net.core.wmem_max": {},
    "net.core.netdev_max_backlog": {},
    "net.ipv4.tcp_rmem": {},
    "net.ipv4.tcp_wmem": {},
}
GPU_NODE_EXPECT = {
    "net.core.rmem_max": {"min": 16777216},
    "net.core.wmem_max": {"min": 16777216},
    "net.core.netdev_max_backlog": {"min": 30000},
    "net.ipv4.tcp_rmem": {"min": [None, None, 16777216]},
    "net.ipv4.tcp_wmem": {"min": [None, None, 16777216]},
}


@pytest.fixture
def tuned(fake_host):
    """A host as the sysctl_tuning role leaves it, with /proc/sys as the kernel writes it."""
    fake_host.file("/proc/sys/vm/swappiness", "10\n")
    fake_host.file("/proc/sys/vm/max_map_count", "1048576\n")
    fake_host.file("/proc/sys/vm/overcommit_memory", "0\n")
    fake_host.file("/proc/sys/vm/zone_reclaim_mode", "0\n")
    fake_host.file("/proc/sys/fs/file-max", "9223372036854775807\n")
    fake_host.file("/proc/sys/fs/nr_open", "1048576\n")
    fake_host.file("/proc/sys/net/core/somaxconn", "4096\n")
    fake_host.file("/proc/sys/net/core/rmem_max", "67108864\n")
    fake_host.file("/proc/sys/net/core/wmem_max", "67108864\n")
    fake_host.file("/proc/sys/net/core/netdev_max_backlog", "30000\n")
    fake_host.file("/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t67108864\n")
    fake_host.file("/proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t67108864\n")
    fake_host.file("/proc/sys/net/ipv4/tcp_congestion_control", "bbr\n")
    return fake_host


def run(host, expect):
    return sysctl.run(host.context({"expect": expect}))


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def test_tuned_host_passes_default_and_gpu_node(tuned):
    result = run(tuned, {**DEFAULT_EXPECT, **GPU_NODE_EXPECT})
    assert result.status == Status.PASS, result.summary
    assert result.data["values"]["vm.max_map_count"] == 1048576
    assert result.data["values"]["fs.file-max"] == 2**63 - 1
    assert result.data["values"]["net.ipv4.tcp_rmem"] == [4096, 131072, 67108864]
    rmem = finding(result, "net.ipv4.tcp_rmem")
    assert rmem.expected == ">= * * 16777216"
    assert rmem.source == "/proc/sys/net/ipv4/tcp_rmem"


def test_debian_defaults_fail_with_role_remedy(tuned):
    tuned.file("/proc/sys/vm/swappiness", "60\n")
    tuned.file("/proc/sys/vm/max_map_count", "65530\n")
    result = run(tuned, DEFAULT_EXPECT)
    assert result.status == Status.FAIL
    swappiness = finding(result, "vm.swappiness")
    assert (swappiness.status, swappiness.measured, swappiness.display) == (
        Status.FAIL,
        60,
        "60 > 10",
    )
    maps = finding(result, "vm.max_map_count")
    assert (maps.status, maps.measured, maps.expected) == (Status.FAIL, 65530, ">= 262144")
    assert "sysctl_tuning_settings['vm.max_map_count'] (role sysctl_tuning) to 262144 or more" in (
        result.remedy
    )
    assert "sysctl_tuning_settings['vm.swappiness'] (role sysctl_tuning) to 10 or less" in (
        result.remedy
    )
    assert "ansible-playbook site.yml --tags sysctl_tuning" in result.remedy
    assert finding(result, "fs.nr_open").status == Status.PASS


def test_equals_mismatch_fails(tuned):
    tuned.file("/proc/sys/vm/zone_reclaim_mode", "1\n")
    result = run(tuned, {"vm.zone_reclaim_mode": {"equals": 0}})
    zone = finding(result, "vm.zone_reclaim_mode")
    assert (zone.status, zone.measured, zone.display) == (Status.FAIL, 1, "1 != 0")
    assert "to 0" in zone.remedy


def test_equals_string(tuned):
    ok = run(tuned, {"net.ipv4.tcp_congestion_control": {"equals": "bbr"}})
    assert ok.status == Status.PASS
    tuned.file("/proc/sys/net/ipv4/tcp_congestion_control", "cubic\n")
    bad = run(tuned, {"net.ipv4.tcp_congestion_control": {"equals": "bbr"}})
    assert (bad.status, bad.findings[0].measured) == (Status.FAIL, "cubic")


def test_multi_value_compared_field_by_field(tuned):
    tuned.file("/proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t4194304\n")
    result = run(tuned, {"net.ipv4.tcp_wmem": {"min": [4096, None, 16777216]}})
    wmem = result.findings[0]
    assert wmem.status == Status.FAIL
    assert wmem.measured == [4096, 16384, 4194304]
    assert wmem.display == "4096 16384 4194304 (field 3: 4194304 < 16777216)"


def test_min_and_max_together(tuned):
    expect = {"net.core.somaxconn": {"min": 1024, "max": 2048}}
    result = run(tuned, expect)
    assert (result.status, result.findings[0].display) == (Status.FAIL, "4096 > 2048")
    assert result.findings[0].expected == ">= 1024 and <= 2048"
    assert "between 1024 and 2048" in result.remedy


def test_scalar_against_multi_value_is_a_profile_error(tuned):
    result = run(tuned, {"net.ipv4.tcp_rmem": {"min": 16777216}})
    rmem = result.findings[0]
    assert rmem.status == Status.ERROR
    assert rmem.measured == [4096, 131072, 67108864]
    assert "give a list of 3" in rmem.display
    assert "fix sysctl.expect.net.ipv4.tcp_rmem in the profile" in rmem.remedy


def test_list_of_wrong_length_is_a_profile_error(tuned):
    result = run(tuned, {"vm.swappiness": {"max": [10, 10]}})
    assert result.findings[0].status == Status.ERROR
    assert "one value, not a list of 1" in result.findings[0].display


def test_report_only(tuned):
    result = run(tuned, {"net.core.netdev_max_backlog": {}})
    backlog = result.findings[0]
    assert (backlog.status, backlog.measured, backlog.expected) == (
        Status.PASS,
        30000,
        "report only",
    )
    assert backlog.remedy == ""


def test_unknown_sysctl_is_skipped(tuned):
    result = run(tuned, {"vm.swappiness": {"max": 10}, "net.ipv4.tcp_nosuch": {"min": 1}})
    missing = finding(result, "net.ipv4.tcp_nosuch")
    assert (missing.status, missing.display) == (Status.SKIP, "not on this kernel")
    assert result.status == Status.PASS
    assert result.data["values"]["net.ipv4.tcp_nosuch"] is None


def test_a_directory_is_not_readable(tuned):
    result = run(tuned, {"net.core": {}})
    assert (result.status, result.findings[0].display) == (Status.ERROR, "not readable")


def test_non_numeric_value_against_min_is_an_error(tuned):
    result = run(tuned, {"net.ipv4.tcp_congestion_control": {"min": 1}})
    assert result.findings[0].status == Status.ERROR
    assert "'bbr' is not a number" in result.findings[0].display


def test_empty_value_is_an_error(tuned):
    tuned.file("/proc/sys/vm/swappiness", "\n")
    result = run(tuned, {"vm.swappiness": {"max": 10}})
    assert (result.findings[0].status, result.findings[0].display) == (Status.ERROR, "empty value")


def test_null_expectation_is_not_read(tuned):
    result = run(tuned, {"vm.swappiness": None, "vm.max_map_count": {"min": 1}})
    assert [f.name for f in result.findings] == ["vm.max_map_count"]


def test_no_expectations_skip(tuned):
    assert run(tuned, {}).status == Status.SKIP
    assert run(tuned, {"vm.swappiness": None}).status == Status.SKIP


def test_slash_names_keep_their_dots(fake_host):
    fake_host.file("/proc/sys/net/ipv4/conf/eth0.100/rp_filter", "2\n")
    for name in ("net/ipv4/conf/eth0.100/rp_filter", "net.ipv4.conf.eth0/100.rp_filter"):
        result = run(fake_host, {name: {"max": 2}})
        assert (result.status, result.findings[0].measured) == (Status.PASS, 2)
        assert result.findings[0].source == "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"


def test_bad_name_is_an_error_not_a_read(fake_host):
    fake_host.file("/etc/passwd", "root:x:0:0\n")
    result = run(fake_host, {"net/../../../etc/passwd": {}})
    assert result.findings[0].status == Status.ERROR
    assert "not a sysctl name" in result.findings[0].display


def test_proposed_profile_sections_validate():
    schema = c.build_schema({"sysctl": sysctl.SCHEMA})

    def check(expect):
        section = {"enabled": True, "severity": "warn", "expect": expect}
        c.validate({"require_gpu": False, "checks": {"sysctl": section}}, schema, "p", True)

    check(DEFAULT_EXPECT)
    check({**DEFAULT_EXPECT, **GPU_NODE_EXPECT})
    check({"net.ipv4.tcp_congestion_control": {"equals": "bbr"}, "vm.swappiness": None})
    with pytest.raises(c.ConfigError, match=r"vm\.swappiness"):
        check({"vm.swappiness": {"maximum": 10}})
    with pytest.raises(c.ConfigError, match="does not match"):
        check({"swappiness": {"max": 10}})
    with pytest.raises(c.ConfigError, match=r"vm\.swappiness"):
        check({"vm.swappiness": {"min": "ten"}})
    with pytest.raises(c.ConfigError, match=r"vm\.swappiness"):
        check({"vm.swappiness": {"min": []}})


# --- parsers ---------------------------------------------------------------------------

FIELD = st.integers(-(2**64), 2**64) | st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz_-:", min_size=1, max_size=10
).filter(lambda w: w.lstrip("-").lstrip("_") and not w.lstrip("-_").isdigit())


@given(st.lists(FIELD, max_size=6))
def test_value_round_trip(fields):
    assert sysctl.parse_value(sysctl.format_value(tuple(fields))) == tuple(fields)


@given(st.text(max_size=300))
def test_parse_value_never_crashes(text):
    fields = sysctl.parse_value(text)
    assert len(fields) == len(text.split())


@given(st.text(max_size=80))
def test_proc_path_stays_in_proc_sys(name):
    try:
        path = sysctl.proc_path(name)
    except ValueError:
        return
    assert posixpath.normpath(path) == path
    assert path.startswith("/proc/sys/")


@given(
    st.lists(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=10),
        min_size=2,
        max_size=6,
    )
)
def test_dotted_and_slashed_names_agree(parts):
    assert sysctl.proc_path(".".join(parts)) == sysctl.proc_path("/".join(parts))
    assert sysctl.proc_path(".".join(parts)) == "/proc/sys/" + "/".join(parts)


@given(st.integers(), st.integers(), st.integers())
def test_compare_single_field(value, low, high):
    ok, unmet = sysctl.compare((value,), {"min": low, "max": high})
    assert ok is (low <= value <= high)
    assert len(unmet) == (value < low) + (value > high)
    assert sysctl.compare((value,), {"equals": value}) == (True, [])


@given(st.lists(st.integers(), min_size=1, max_size=5), st.data())
def test_compare_fields_with_none_ignored(fields, data):
    wanted = data.draw(st.lists(st.none() | st.integers(), min_size=len(fields),
                                max_size=len(fields)))  # fmt: skip
    ok, unmet = sysctl.compare(tuple(fields), {"min": wanted})
    expected = [have < want for have, want in zip(fields, wanted) if want is not None]
    assert ok is (not any(expected))
    assert len(unmet) == sum(expected)


# --- this machine ----------------------------------------------------------------------


def _independent(name: str) -> str:
    tool = ["sysctl", "-n", name] if shutil.which("sysctl") else None
    argv = tool or ["cat", sysctl.proc_path(name)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return done.stdout


@pytest.mark.real
def test_real_values_match_sysctl_n():
    expect = {**{name: {} for name in DEFAULT_EXPECT}, "kernel.ostype": {"equals": "Linux"}}
    result = sysctl.run(CheckContext(system=System(), config={"expect": expect}))
    assert result.status == Status.PASS, result.summary
    for name in expect:
        fields = sysctl.parse_value(_independent(name))
        measured = result.data["values"][name]
        assert measured == (fields[0] if len(fields) == 1 else list(fields)), name
