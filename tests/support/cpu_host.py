"""A fake host's CPUs, memory and PCI devices, and the cpu and memory checks' settings, for
the tests of hostcheck's checks and of the shared CPU rules."""

from hostcheck._shared.cpus import format_cpulist

CPU_CONFIG = {
    "governor": "performance",
    "expect_smt": None,
    "min_workers_per_rank": 2,
    "reserve_cores_per_rank": 1,
    "ranks": None,
}


MEMORY_CONFIG = {
    "min_ram": "64GiB",
    "min_ram_per_gpu": "32GiB",
    "allow_swap": False,
    "max_swap_used": None,
    "thp_enabled": ["madvise", "always"],
    "thp_defrag": ["madvise", "defer+madvise", "defer", "never"],
}


def cpu_config(**changes):
    return {**CPU_CONFIG, **changes}


def memory_config(**changes):
    return {**MEMORY_CONFIG, **changes}


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def build_cpus(host, sockets, cores, threads, governor="performance", dies=1, numa=True):
    """Linux numbering: first threads of all cores, then their siblings."""
    per_package = cores * dies
    total = sockets * per_package * threads
    host.file("/sys/devices/system/cpu/online", f"0-{total - 1}\n")
    host.file("/sys/devices/system/cpu/smt/active", "1\n" if threads > 1 else "0\n")
    host.file("/sys/devices/system/cpu/smt/control", "on\n" if threads > 1 else "off\n")
    nodes: dict[int, list[int]] = {}
    for cpu_id in range(total):
        _thread, rest = divmod(cpu_id, sockets * per_package)
        package, within = divmod(rest, per_package)
        die, core = divmod(within, cores)
        base = f"/sys/devices/system/cpu/cpu{cpu_id}"
        host.file(f"{base}/topology/physical_package_id", f"{package}\n")
        host.file(f"{base}/topology/die_id", f"{die}\n")
        host.file(f"{base}/topology/core_id", f"{core}\n")
        if governor is not None:
            host.file(f"{base}/cpufreq/scaling_governor", f"{governor}\n")
        nodes.setdefault(package if numa else 0, []).append(cpu_id)
    for node, cpus in nodes.items():
        host.file(f"/sys/devices/system/node/node{node}/cpulist", format_cpulist(cpus) + "\n")
    return total


def add_pci(host, address, vendor="0x10de", cls="0x030200", numa=-1, driver="nvidia"):
    base = f"/sys/bus/pci/devices/{address}"
    host.file(f"{base}/vendor", vendor + "\n")
    host.file(f"{base}/class", cls + "\n")
    host.file(f"{base}/device", "0x2330\n")
    host.file(f"{base}/numa_node", f"{numa}\n")
    host.file(f"{base}/uevent", f"DRIVER={driver}\nPCI_SLOT_NAME={address}\n")


def meminfo(total_kib, swap_kib=0, swap_free_kib=None):
    swap_free_kib = swap_kib if swap_free_kib is None else swap_free_kib
    return (
        f"MemTotal:       {total_kib} kB\nMemFree:        1000 kB\n"
        f"MemAvailable:   {total_kib // 2} kB\n"
        f"SwapTotal:      {swap_kib} kB\nSwapFree:       {swap_free_kib} kB\n"
    )


SWAPS_HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
