import re
import subprocess

import psutil
import pytest
from hostcheck._shared.cpus import format_cpulist, parse_cpulist
from hypothesis import given
from hypothesis import strategies as st

from hostcheck.checks import cpu
from hostcheck.checks.base import CheckContext
from hostcheck.model import Status
from hostcheck.mounts import escape
from hostcheck.system import System
from tests.support.cpu_host import (
    SWAPS_HEADER,
    add_pci,
    build_cpus,
    cpu_config,
    finding,
    meminfo,
    memory_config,
)

GiB = 2**30


def add_gpus(host, count, numa_of=lambda i: -1):
    for i in range(count):
        add_pci(host, f"0000:{0x18 + i:02x}:00.0", numa=numa_of(i))


# ---------------------------------------------------------------- cpu fixtures


def test_dual_socket_eight_gpus_counts_cores_and_workers(fake_host):
    build_cpus(fake_host, sockets=2, cores=16, threads=2)
    add_gpus(fake_host, 8)
    add_pci(fake_host, "0000:18:00.1", cls="0x040300")  # the GPU's HDMI audio function
    add_pci(fake_host, "0000:05:00.0", cls="0x068000")  # an NVSwitch bridge
    add_pci(fake_host, "0000:00:03.0", vendor="0x1af4", cls="0x030000")  # not NVIDIA
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert result.status == Status.PASS
    assert finding(result, "logical cpus").measured == 64
    assert finding(result, "physical cores").measured == 32
    assert finding(result, "smt").measured is True
    workers = finding(result, "workers per rank")
    assert workers.measured == (32 - 8) // 8 == 3
    assert result.data["ranks"] == 8
    assert result.data["workers_per_rank_numa_local"] is None  # GPUs' nodes unknown (-1)
    assert [g["address"] for g in result.data["pci_gpus"]][:2] == [
        "0000:18:00.0",
        "0000:19:00.0",
    ]
    assert len(result.data["pci_gpus"]) == 8
    assert result.data["numa_nodes"] == {"0": "0-15,32-47", "1": "16-31,48-63"}
    assert finding(result, "governor").display == "performance on all 64 CPUs with cpufreq"
    assert result.summary == (
        "32 physical cores / 64 CPUs, 2 NUMA node(s), governor performance; "
        "3 DataLoader worker(s) per rank for 8 rank(s)"
    )


def test_cpu_model_is_recorded_for_fleet_grouping(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=1)
    fake_host.file(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC 9654  96-Core Processor\nflags\t\t: fpu avx2\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 9654  96-Core Processor\n",
    )
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert result.data["model"] == "AMD EPYC 9654 96-Core Processor"


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n", None),  # arm64: no name
        ("processor\t: 0\ncpu model\t: Loongson-3A5000\n", "Loongson-3A5000"),
        ("cpu\t\t: POWER9 (raw)\nmodel\t\t: 2.2 (pvr 004e 1202)\n", "POWER9 (raw)"),
        ("", None),
    ],
)
def test_cpu_model_on_other_architectures(text, model):
    assert cpu.cpu_model(text) == model


def test_no_gpu_means_one_rank(fake_host):
    build_cpus(fake_host, sockets=1, cores=8, threads=2)
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert result.data["ranks"] == 1
    assert finding(result, "workers per rank").measured == 7


def test_ranks_from_profile_override_gpu_count(fake_host):
    build_cpus(fake_host, sockets=1, cores=8, threads=1)
    add_gpus(fake_host, 8)
    result = cpu.run_cpu(fake_host.context(cpu_config(ranks=2)))
    assert result.data["ranks"] == 2
    assert finding(result, "workers per rank").measured == (8 - 2) // 2
    assert result.data["ranks_source"] == "profile cpu.ranks"


def test_powersave_governor_on_some_cpus_fails(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=1)
    for cpu_id in (2, 3):
        fake_host.file(
            f"/sys/devices/system/cpu/cpu{cpu_id}/cpufreq/scaling_governor", "powersave\n"
        )
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    governor = finding(result, "governor")
    assert governor.status == Status.FAIL
    assert governor.measured == {
        "0": "performance",
        "1": "performance",
        "2": "powersave",
        "3": "powersave",
    }
    assert governor.display == "performance on cpus 0-1, powersave on cpus 2-3"
    assert result.status == Status.FAIL
    assert "sysctl_tuning_cpu_governor: performance" in result.remedy
    assert "--tags sysctl_tuning" in result.remedy


def test_governor_not_checked_when_profile_leaves_it_open(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=1, governor="schedutil")
    result = cpu.run_cpu(fake_host.context(cpu_config(governor=None)))
    assert finding(result, "governor").status == Status.PASS
    assert finding(result, "governor").measured["0"] == "schedutil"


def test_no_cpufreq_skips_governor(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=1, governor=None)
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    governor = finding(result, "governor")
    assert governor.status == Status.SKIP
    assert governor.display == "not exposed (VM or driver)"
    assert result.status == Status.PASS


def test_too_few_cores_per_gpu_warns(fake_host):
    build_cpus(fake_host, sockets=1, cores=8, threads=2)
    add_gpus(fake_host, 8)
    result = cpu.run_cpu(fake_host.context(cpu_config(min_workers_per_rank=4)))
    workers = finding(result, "workers per rank")
    assert workers.measured == 1  # (8 - 8) // 8 = 0, but a rank always gets one worker
    assert workers.status == Status.WARN
    assert result.status == Status.WARN
    assert "num_workers=1" in result.remedy
    assert result.summary.startswith("workers per rank 1 per rank")


def test_gpus_crowded_on_one_numa_node_lower_the_worker_count(fake_host):
    build_cpus(fake_host, sockets=2, cores=16, threads=1)
    add_gpus(fake_host, 4, numa_of=lambda i: 0)
    result = cpu.run_cpu(fake_host.context(cpu_config(min_workers_per_rank=4)))
    assert result.data["workers_per_rank"] == (32 - 4) // 4 == 7
    assert result.data["workers_per_rank_numa_local"] == (16 - 4) // 4 == 3
    workers = finding(result, "workers per rank")
    assert workers.measured == 3
    assert workers.status == Status.WARN
    assert "NUMA-local 3" in workers.display
    assert "whole host 7 per rank = (32 physical cores - 1 x 4 ranks) // 4 ranks" in workers.display


def test_gpus_spread_evenly_over_numa_nodes(fake_host):
    build_cpus(fake_host, sockets=2, cores=16, threads=1)
    add_gpus(fake_host, 8, numa_of=lambda i: i // 4)
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert result.data["workers_per_rank_numa_local"] == (16 - 4) // 4
    assert finding(result, "workers per rank").measured == 3


def test_core_ids_repeating_across_dies_are_different_cores(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=1, dies=2)
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert finding(result, "physical cores").measured == 8


def test_smt_expected_off_but_on_fails(fake_host):
    build_cpus(fake_host, sockets=1, cores=4, threads=2)
    result = cpu.run_cpu(fake_host.context(cpu_config(expect_smt=False)))
    smt = finding(result, "smt")
    assert smt.status == Status.FAIL
    assert smt.display == "on (control: on)"


def test_missing_topology_falls_back_to_logical_cpus(fake_host):
    fake_host.file("/sys/devices/system/cpu/online", "0-3\n")
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert finding(result, "physical cores").status == Status.SKIP
    assert finding(result, "logical cpus").measured == 4
    assert finding(result, "workers per rank").measured == 3
    assert "logical CPUs" in finding(result, "workers per rank").display
    assert finding(result, "smt").status == Status.SKIP
    assert finding(result, "numa").display == "not exposed"


def test_cpu_directories_used_when_online_file_is_missing(fake_host):
    for cpu_id in range(3):
        fake_host.file(f"/sys/devices/system/cpu/cpu{cpu_id}/topology/core_id", f"{cpu_id}\n")
        fake_host.file(f"/sys/devices/system/cpu/cpu{cpu_id}/topology/physical_package_id", "0\n")
    result = cpu.run_cpu(fake_host.context(cpu_config()))
    assert finding(result, "logical cpus").measured == 3
    assert finding(result, "physical cores").measured == 3


# ---------------------------------------------------------------- memory fixtures


@pytest.fixture
def big_host(fake_host):
    """1 TiB of RAM, 8 GPUs, no swap, THP madvise."""
    fake_host.file("/proc/meminfo", meminfo(1024 * 2**20))
    fake_host.file("/proc/swaps", SWAPS_HEADER)
    fake_host.file("/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    fake_host.file(
        "/sys/kernel/mm/transparent_hugepage/defrag",
        "always defer defer+madvise [madvise] never\n",
    )
    add_gpus(fake_host, 8)
    return fake_host


def test_healthy_memory_passes_with_values(big_host):
    result = cpu.run_memory(big_host.context(memory_config()))
    assert result.status == Status.PASS
    assert finding(result, "ram").measured == 1024 * GiB
    assert finding(result, "ram per gpu").measured == 128 * GiB
    assert finding(result, "swap").measured == 0
    assert finding(result, "thp enabled").measured == "madvise"
    assert finding(result, "thp defrag").measured == "madvise"
    assert result.data["ram_per_gpu_bytes"] == 128 * GiB
    assert result.data["available_bytes"] == 512 * GiB
    assert result.summary == "RAM 1.0 TiB, swap 0 B, THP enabled=madvise defrag=madvise"


def test_thp_always_fails_when_profile_wants_madvise(big_host):
    big_host.file("/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
    result = cpu.run_memory(big_host.context(memory_config(thp_enabled=["madvise"])))
    thp = finding(result, "thp enabled")
    assert thp.status == Status.FAIL
    assert thp.measured == "always"
    assert "sysctl_tuning_thp_enabled: madvise" in result.remedy


def test_thp_defrag_always_fails(big_host):
    big_host.file(
        "/sys/kernel/mm/transparent_hugepage/defrag",
        "[always] defer defer+madvise madvise never\n",
    )
    result = cpu.run_memory(big_host.context(memory_config()))
    assert finding(result, "thp defrag").status == Status.FAIL
    assert "sysctl_tuning_thp_defrag" in result.remedy
    assert result.status == Status.FAIL


def test_kernel_without_thp_skips(big_host):
    (big_host.root / "sys/kernel/mm/transparent_hugepage/enabled").unlink()
    result = cpu.run_memory(big_host.context(memory_config()))
    assert finding(result, "thp enabled").status == Status.SKIP
    assert result.status == Status.PASS


def test_unparseable_thp_is_an_error(big_host):
    big_host.file("/sys/kernel/mm/transparent_hugepage/enabled", "madvise\n")
    result = cpu.run_memory(big_host.context(memory_config()))
    assert finding(result, "thp enabled").status == Status.ERROR


def test_swap_fails_when_not_allowed_and_passes_when_allowed(big_host):
    big_host.file("/proc/meminfo", meminfo(1024 * 2**20, swap_kib=8 * 2**20))
    big_host.file("/proc/swaps", SWAPS_HEADER + "/swap\\040file\tfile\t\t8388604\t\t0\t\t-2\n")
    denied = cpu.run_memory(big_host.context(memory_config()))
    assert finding(denied, "swap").status == Status.FAIL
    assert finding(denied, "swap").measured == 8 * GiB
    assert denied.data["swap_areas"][0]["filename"] == "/swap file"
    assert "sysctl_tuning_settings" in denied.remedy
    allowed = cpu.run_memory(big_host.context(memory_config(allow_swap=True)))
    assert finding(allowed, "swap").status == Status.PASS
    assert allowed.status == Status.PASS


def test_swap_in_use_warns_above_limit(big_host):
    big_host.file(
        "/proc/meminfo", meminfo(1024 * 2**20, swap_kib=8 * 2**20, swap_free_kib=6 * 2**20)
    )
    cfg = memory_config(allow_swap=True, max_swap_used="1GiB")
    result = cpu.run_memory(big_host.context(cfg))
    used = finding(result, "swap used")
    assert used.measured == 2 * GiB
    assert used.status == Status.WARN
    assert result.status == Status.WARN


def test_little_ram_per_gpu_fails(big_host):
    big_host.file("/proc/meminfo", meminfo(128 * 2**20))
    result = cpu.run_memory(big_host.context(memory_config(min_ram="16GiB")))
    per_gpu = finding(result, "ram per gpu")
    assert per_gpu.measured == 16 * GiB
    assert per_gpu.status == Status.FAIL
    assert finding(result, "ram").status == Status.PASS


def test_ram_below_minimum_fails(big_host):
    result = cpu.run_memory(big_host.context(memory_config(min_ram="2TiB")))
    assert finding(result, "ram").status == Status.FAIL


def test_no_gpu_skips_ram_per_gpu(fake_host):
    fake_host.file("/proc/meminfo", meminfo(64 * 2**20))
    result = cpu.run_memory(fake_host.context(memory_config(thp_enabled=["never"])))
    assert finding(result, "ram per gpu").status == Status.SKIP
    assert result.data["ram_per_gpu_bytes"] is None


def test_missing_meminfo_is_an_error(fake_host):
    result = cpu.run_memory(fake_host.context(memory_config()))
    assert result.status == Status.ERROR


# ---------------------------------------------------------------- parsers


def test_parse_cpulist_examples():
    assert parse_cpulist("0-3,8-11\n") == [0, 1, 2, 3, 8, 9, 10, 11]
    assert parse_cpulist("5") == [5]
    assert parse_cpulist("") == []
    with pytest.raises(ValueError):
        parse_cpulist("3-1")
    with pytest.raises(ValueError):
        parse_cpulist("0-3,,5")


@given(st.sets(st.integers(min_value=0, max_value=4096), max_size=200))
def test_cpulist_round_trip(cpus):
    text = format_cpulist(list(cpus))
    assert parse_cpulist(text) == sorted(cpus)
    assert format_cpulist(parse_cpulist(text)) == text


@given(st.text(max_size=40))
def test_parse_cpulist_only_raises_value_error(text):
    try:
        cpus = parse_cpulist(text)
    except ValueError:
        return
    assert cpus == sorted(set(cpus))


mode = st.text(alphabet="abcdefghijklmnopqrstuvwxyz+_-", min_size=1, max_size=12)


@given(st.lists(mode, min_size=1, max_size=6, unique=True), st.data())
def test_bracketed_mode_round_trip(options, data):
    chosen = data.draw(st.integers(min_value=0, max_value=len(options) - 1))
    text = " ".join(f"[{o}]" if i == chosen else o for i, o in enumerate(options))
    assert cpu.parse_bracketed(text + "\n") == (options[chosen], options)


@given(st.text(max_size=60))
def test_parse_bracketed_never_crashes(text):
    selected, options = cpu.parse_bracketed(text)
    assert selected is None or selected in options


swap_name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz/_. \t\\", min_size=1, max_size=20)


@given(
    st.lists(
        st.tuples(
            swap_name,
            st.sampled_from(["partition", "file"]),
            st.integers(0, 2**40),
            st.integers(0, 2**40),
            st.integers(-100, 100),
        ),
        max_size=5,
    )
)
def test_swaps_round_trip(areas):
    text = SWAPS_HEADER + "".join(f"{escape(n)}\t{t}\t{s}\t{u}\t{p}\n" for n, t, s, u, p in areas)
    parsed = cpu.parse_swaps(text)
    assert [(a.filename, a.kind, a.size_bytes, a.used_bytes, a.priority) for a in parsed] == [
        (n, t, s * 1024, u * 1024, p) for n, t, s, u, p in areas
    ]


@given(st.text(max_size=200))
def test_parse_swaps_never_crashes(text):
    for area in cpu.parse_swaps(text):
        assert area.size_bytes % 1024 == 0


@given(st.integers(1, 1024), st.integers(1, 64), st.integers(0, 4))
def test_workers_rule_never_oversubscribes(cores, ranks, reserve):
    workers = cpu.workers_per_rank(cores, ranks, reserve)
    assert workers >= 1
    if cores >= (reserve + 1) * ranks:
        assert (workers + reserve) * ranks <= cores
        assert (workers + 1 + reserve) * ranks > cores  # and wastes less than a rank's worth


# ---------------------------------------------------------------- this machine


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


REAL_CPU = cpu_config(governor=None, min_workers_per_rank=0)


@pytest.mark.real
def test_real_cores_agree_with_lscpu_and_psutil():
    lines = [ln for ln in _run(["lscpu", "-p=CPU,CORE,SOCKET"]).splitlines() if ln[:1] != "#"]
    pairs = {tuple(ln.split(",")[1:]) for ln in lines}
    result = cpu.run_cpu(CheckContext(System(), REAL_CPU))
    assert finding(result, "logical cpus").measured == len(lines)
    assert finding(result, "physical cores").measured == len(pairs)
    assert finding(result, "physical cores").measured == psutil.cpu_count(logical=False)
    assert finding(result, "logical cpus").measured == psutil.cpu_count(logical=True)


@pytest.mark.real
def test_real_numa_and_governor_agree_with_lscpu_and_cat():
    result = cpu.run_cpu(CheckContext(System(), REAL_CPU))
    by_node: dict[str, list[int]] = {}
    for line in _run(["lscpu", "-p=CPU,NODE"]).splitlines():
        if line[:1] != "#":
            cpu_id, node = line.split(",")
            by_node.setdefault(node, []).append(int(cpu_id))
    if "" in by_node:
        pytest.skip("lscpu reports no NUMA nodes on this machine")
    with_cpus = {n: c for n, c in result.data["numa_nodes"].items() if c}
    assert with_cpus == {n: format_cpulist(c) for n, c in by_node.items()}
    governors = subprocess.run(
        "cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert sorted(result.data["governors"].values()) == sorted(governors)
    expected = Status.SKIP if not governors else Status.PASS
    assert finding(result, "governor").status == expected


@pytest.mark.real
def test_real_memory_agrees_with_free_cat_and_proc_swaps():
    result = cpu.run_memory(CheckContext(System(), memory_config(min_ram=None)))
    free = {ln.split()[0]: ln.split()[1:] for ln in _run(["free", "-b"]).splitlines()[1:]}
    assert finding(result, "ram").measured == int(free["Mem:"][0])
    assert finding(result, "swap").measured == int(free["Swap:"][0])
    assert finding(result, "swap used").measured == int(free["Swap:"][1])
    swap_lines = _run(["cat", "/proc/swaps"]).splitlines()[1:]
    assert len(result.data["swap_areas"]) == len(swap_lines)
    for which in ("enabled", "defrag"):
        text = _run(["cat", f"/sys/kernel/mm/transparent_hugepage/{which}"])
        assert finding(result, f"thp {which}").measured == re.search(r"\[(\S+)\]", text)[1]
    listing = _run(
        [
            "bash",
            "-c",
            "for d in /sys/bus/pci/devices/*; do echo $(cat $d/vendor) $(cat $d/class); done",
        ]
    ).split("\n")
    gpus = [ln for ln in listing if ln.startswith("0x10de 0x03")]
    assert result.data["pci_gpu_count"] == len(gpus)
