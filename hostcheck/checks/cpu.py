"""CPU and memory: how many DataLoader workers the host can feed, and the kernel settings
that slow them down (cpufreq governor, transparent huge pages, swap)."""

from __future__ import annotations

from dataclasses import dataclass

from hostcheck import config as c
from hostcheck._shared.cpus import CPU_DIR, cpufreq_governors, format_cpulist
from hostcheck._shared.mountinfo import unescape
from hostcheck._shared.sizes import format_size, parse_size
from hostcheck._shared.thp import THP_DIR, parse_bracketed
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.pci import nvidia_gpus
from hostcheck.system import System
from hostcheck.topology import NODE_DIR, read_numa, read_topology

TAGS = "ansible-playbook site.yml --tags sysctl_tuning"
THP_ENABLED_MODES = ("always", "madvise", "never")
THP_DEFRAG_MODES = ("always", "defer", "defer+madvise", "madvise", "never")

CPU_SCHEMA = c.obj(
    {
        "governor": c.nullable({"type": "string", "minLength": 1}),
        "expect_smt": c.nullable({"type": "boolean"}),
        "min_workers_per_rank": {"type": "integer", "minimum": 0},
        "reserve_cores_per_rank": {"type": "integer", "minimum": 0},
        "ranks": c.nullable(c.POSITIVE_INT),
    }
)

MEMORY_SCHEMA = c.obj(
    {
        "min_ram": c.nullable(c.SIZE),
        "min_ram_per_gpu": c.nullable(c.SIZE),
        "allow_swap": {"type": "boolean"},
        "max_swap_used": c.nullable(c.SIZE),
        "thp_enabled": {
            "type": "array",
            "minItems": 1,
            "items": {"enum": list(THP_ENABLED_MODES)},
        },
        "thp_defrag": {
            "type": "array",
            "minItems": 1,
            "items": {"enum": list(THP_DEFRAG_MODES)},
        },
    }
)


# ---------------------------------------------------------------- parsers (pure)


@dataclass(frozen=True)
class SwapArea:
    filename: str
    kind: str
    size_bytes: int
    used_bytes: int
    priority: int


def parse_swaps(text: str) -> list[SwapArea]:
    """/proc/swaps (sizes in KiB); the header line and malformed lines are skipped. The
    kernel escapes space, tab, newline and backslash in the file name as octal (\\040)."""
    areas = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) != 5:
            continue
        try:
            size, used, priority = int(parts[2]), int(parts[3]), int(parts[4])
        except ValueError:
            continue
        areas.append(SwapArea(unescape(parts[0]), parts[1], size * 1024, used * 1024, priority))
    return areas


def cpu_model(cpuinfo: str) -> str | None:
    """The CPU's model name from /proc/cpuinfo (x86 `model name`; other architectures
    `cpu model`, `cpu`, `model` or `Processor`); None when the kernel shows none."""
    found: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if sep and value and key not in found:
            found[key] = value
    for key in ("model name", "cpu model", "cpu", "model", "processor"):
        value = found.get(key)
        if value and not value.isdigit():
            return " ".join(value.split())
    return None


# ---------------------------------------------------------------- workers per rank


def workers_per_rank(cores: int, ranks: int, reserve: int) -> int:
    """Cores left after each rank's main process keeps `reserve`, shared by the ranks."""
    return max(1, (cores - reserve * ranks) // ranks)


def numa_local_workers(
    node_cores: dict[int, int], gpus_per_node: dict[int, int], reserve: int
) -> int | None:
    """Workers per rank when every rank is bound to its GPU's NUMA node: the node with the
    fewest cores per GPU decides. None when the placement is not known."""
    if len(node_cores) < 2 or not gpus_per_node or any(n < 0 for n in gpus_per_node):
        return None
    return min(
        workers_per_rank(node_cores.get(node, 0), count, reserve)
        for node, count in gpus_per_node.items()
    )


# ---------------------------------------------------------------- cpu check


def _if_clean(findings: list[Finding], summary: str) -> str | None:
    """A short summary when nothing is wrong; otherwise None, so the bad findings show."""
    bad = (Status.WARN, Status.FAIL, Status.ERROR)
    return None if any(f.status in bad for f in findings) else summary


def _governor_word(governors: dict[int, str]) -> str:
    values = sorted(set(governors.values()))
    return "/".join(values) if values else "not exposed"


def _governor_finding(cfg: dict, governors: dict[int, str]) -> Finding:
    source = f"{CPU_DIR}/cpu*/cpufreq/scaling_governor"
    wanted = cfg["governor"]
    if not governors:
        return Finding("governor", Status.SKIP, None, wanted, "not exposed (VM or driver)", source)
    by_value: dict[str, list[int]] = {}
    for cpu, value in governors.items():
        by_value.setdefault(value, []).append(cpu)
    display = ", ".join(f"{v} on cpus {format_cpulist(cpus)}" for v, cpus in by_value.items())
    if len(by_value) == 1:
        display = f"{next(iter(by_value))} on all {len(governors)} CPUs with cpufreq"
    wrong = [cpu for cpu, value in governors.items() if wanted is not None and value != wanted]
    return Finding(
        "governor",
        Status.FAIL if wrong else Status.PASS,
        {str(cpu): value for cpu, value in governors.items()},
        wanted if wanted is not None else "any (not checked)",
        display,
        source,
        f"set sysctl_tuning_cpu_governor: {wanted} (role sysctl_tuning) and run: {TAGS}",
    )


def _smt_finding(cfg: dict, active: int | None, control: str | None) -> Finding:
    source = f"{CPU_DIR}/smt/active"
    wanted = cfg["expect_smt"]
    expected = "any (not checked)" if wanted is None else ("on" if wanted else "off")
    if active is None:
        return Finding("smt", Status.SKIP, None, expected, "not exposed by this kernel", source)
    status = Status.PASS
    if wanted is not None and bool(active) != wanted:
        status = Status.FAIL
    return Finding(
        "smt",
        status,
        bool(active),
        expected,
        f"{'on' if active else 'off'} (control: {control or 'unknown'})",
        source,
        "SMT is a firmware or kernel command line setting (nosmt); no role variable "
        "manages it: change it in the BIOS or the boot loader",
    )


def _numa_display(numa: dict[int, list[int]]) -> str:
    if not numa:
        return "not exposed"
    nodes = ", ".join(f"node{n} cpus {format_cpulist(cpus) or '-'}" for n, cpus in numa.items())
    return f"{len(numa)} node(s): {nodes}"


def run_cpu(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    system = ctx.system
    topo = read_topology(system)
    logical = len(topo.online)
    physical = topo.physical_cores
    smt_active = system.read_int(f"{CPU_DIR}/smt/active")
    smt_control = system.read_value(f"{CPU_DIR}/smt/control")
    governors = cpufreq_governors(system.read, topo.online)
    numa = read_numa(system)
    gpus = nvidia_gpus(system)

    cores = physical if physical is not None else logical
    reserve = cfg["reserve_cores_per_rank"]
    ranks = cfg["ranks"] or max(1, len(gpus))
    overall = workers_per_rank(cores, ranks, reserve)
    numa_local = None
    if cfg["ranks"] is None and gpus:
        gpus_per_node: dict[int, int] = {}
        for gpu in gpus:
            gpus_per_node[gpu.numa_node] = gpus_per_node.get(gpu.numa_node, 0) + 1
        node_cores = {node: topo.cores_among(cpus) for node, cpus in numa.items()}
        numa_local = numa_local_workers(node_cores, gpus_per_node, reserve)
    effective = overall if numa_local is None else min(overall, numa_local)
    minimum = cfg["min_workers_per_rank"]

    rank_source = (
        "profile cpu.ranks"
        if cfg["ranks"]
        else (f"{len(gpus)} NVIDIA GPUs on the PCI bus" if gpus else "no NVIDIA GPU: 1 rank")
    )
    rule = (
        f"({cores} {'physical cores' if physical is not None else 'logical CPUs'}"
        f" - {reserve} x {ranks} ranks) // {ranks} ranks"
    )
    workers_display = f"{overall} per rank = {rule}"
    if numa_local is not None:
        workers_display = (
            f"{effective} per rank: NUMA-local {numa_local} (ranks bound to their GPU's node;"
            f" the most crowded node decides), whole host {workers_display}"
        )
    findings = [
        Finding("logical cpus", Status.PASS, logical, "", str(logical), f"{CPU_DIR}/online"),
        Finding(
            "physical cores",
            Status.PASS if physical is not None else Status.SKIP,
            physical,
            "",
            str(physical) if physical is not None else "topology not exposed",
            f"{CPU_DIR}/cpu*/topology/{{physical_package_id,die_id,core_id}}",
        ),
        _smt_finding(cfg, smt_active, smt_control),
        _governor_finding(cfg, governors),
        Finding(
            "numa",
            Status.PASS,
            {str(node): format_cpulist(cpus) for node, cpus in numa.items()},
            "",
            _numa_display(numa),
            f"{NODE_DIR}/node*/cpulist",
        ),
        Finding(
            "workers per rank",
            Status.PASS if effective >= minimum else Status.WARN,
            effective,
            f">= {minimum}",
            workers_display,
            f"topology and {rank_source}",
            "this host has too few cores for its ranks; no role variable adds cores: run "
            f"fewer ranks per host or use DataLoader(num_workers={effective})",
        ),
    ]
    data = {
        "model": cpu_model(system.read("/proc/cpuinfo") or ""),
        "logical_cpus": logical,
        "physical_cores": physical,
        "online": format_cpulist(topo.online),
        "smt_active": None if smt_active is None else bool(smt_active),
        "smt_control": smt_control,
        "governors": {str(cpu): value for cpu, value in governors.items()},
        "numa_nodes": {str(node): format_cpulist(cpus) for node, cpus in numa.items()},
        "pci_gpus": [gpu.to_dict() for gpu in gpus],
        "ranks": ranks,
        "ranks_source": rank_source,
        "reserve_cores_per_rank": reserve,
        "workers_per_rank": overall,
        "workers_per_rank_numa_local": numa_local,
        "workers_per_rank_effective": effective,
    }
    summary = (
        f"{physical if physical is not None else '?'} physical cores / {logical} CPUs, "
        f"{len(numa) or '?'} NUMA node(s), governor {_governor_word(governors)}; "
        f"{effective} DataLoader worker(s) per rank for {ranks} rank(s)"
    )
    return CheckResult.from_findings("cpu", findings, data, summary=_if_clean(findings, summary))


# ---------------------------------------------------------------- memory check


def _thp_finding(system: System, which: str, allowed: list[str], variable: str) -> Finding:
    path = f"{THP_DIR}/{which}"
    name = f"thp {which}"
    text = system.read_value(path)
    expected = " or ".join(allowed)
    if text is None:
        return Finding(name, Status.SKIP, None, expected, "kernel without THP", path)
    selected, options = parse_bracketed(text)
    if selected is None:
        return Finding(name, Status.ERROR, text, expected, f"cannot parse {text!r}", path)
    return Finding(
        name,
        Status.PASS if selected in allowed else Status.FAIL,
        selected,
        expected,
        f"{selected} (of {', '.join(options)})",
        path,
        f"set {variable}: {allowed[0]} (role sysctl_tuning) and run: {TAGS}",
    )


def run_memory(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    system = ctx.system
    meminfo = system.meminfo()
    if "MemTotal" not in meminfo:
        return CheckResult.from_findings(
            "memory",
            [
                Finding(
                    "ram", Status.ERROR, None, "", "no MemTotal in /proc/meminfo", "/proc/meminfo"
                )
            ],
        )
    ram = meminfo["MemTotal"]
    swap_total = meminfo.get("SwapTotal", 0)
    swap_used = swap_total - meminfo.get("SwapFree", swap_total)
    swaps = parse_swaps(system.read("/proc/swaps") or "")
    gpus = nvidia_gpus(system)

    min_ram = parse_size(cfg["min_ram"]) if cfg["min_ram"] is not None else None
    findings = [
        Finding(
            "ram",
            Status.PASS if min_ram is None or ram >= min_ram else Status.FAIL,
            ram,
            f">= {format_size(min_ram)}" if min_ram is not None else "",
            format_size(ram),
            "/proc/meminfo MemTotal",
            "a host sizing issue; no role variable adds RAM: use a larger host",
            unit="bytes",
        )
    ]
    per_gpu_min = cfg["min_ram_per_gpu"]
    if gpus:
        per_gpu = ram // len(gpus)
        wanted = parse_size(per_gpu_min) if per_gpu_min is not None else None
        findings.append(
            Finding(
                "ram per gpu",
                Status.PASS if wanted is None or per_gpu >= wanted else Status.FAIL,
                per_gpu,
                f">= {format_size(wanted)}" if wanted is not None else "",
                f"{format_size(per_gpu)} ({len(gpus)} GPUs)",
                "/proc/meminfo MemTotal and /sys/bus/pci/devices/*/{vendor,class}",
                "a host sizing issue; no role variable adds RAM: fewer GPUs per host, "
                "or fewer DataLoader workers per rank",
                unit="bytes",
            )
        )
    else:
        findings.append(
            Finding(
                "ram per gpu",
                Status.SKIP,
                None,
                "",
                "no NVIDIA GPU on the PCI bus",
                "/sys/bus/pci/devices/*/{vendor,class}",
            )
        )
    swap_fix = (
        "turn swap off (swapoff -a, and remove it from /etc/fstab) or lower vm.swappiness "
        f"through sysctl_tuning_settings (role sysctl_tuning) and run: {TAGS}"
    )
    devices = ", ".join(a.filename for a in swaps) or "no swap areas"
    findings.append(
        Finding(
            "swap",
            Status.PASS if cfg["allow_swap"] or swap_total == 0 else Status.FAIL,
            swap_total,
            "any" if cfg["allow_swap"] else "none",
            f"{format_size(swap_total)} ({devices})",
            "/proc/meminfo SwapTotal, /proc/swaps",
            swap_fix,
            unit="bytes",
        )
    )
    max_used = cfg["max_swap_used"]
    max_used_bytes = parse_size(max_used) if max_used is not None else None
    findings.append(
        Finding(
            "swap used",
            Status.PASS if max_used_bytes is None or swap_used <= max_used_bytes else Status.WARN,
            swap_used,
            f"<= {format_size(max_used_bytes)}" if max_used_bytes is not None else "",
            format_size(swap_used),
            "/proc/meminfo SwapTotal - SwapFree",
            "memory pressure pushed pages to swap: find what uses the RAM, or " + swap_fix,
            unit="bytes",
        )
    )
    findings.append(
        _thp_finding(system, "enabled", cfg["thp_enabled"], "sysctl_tuning_thp_enabled")
    )
    findings.append(_thp_finding(system, "defrag", cfg["thp_defrag"], "sysctl_tuning_thp_defrag"))
    data = {
        "ram_bytes": ram,
        "available_bytes": meminfo.get("MemAvailable"),
        "swap_total_bytes": swap_total,
        "swap_used_bytes": swap_used,
        "swap_areas": [a.__dict__ for a in swaps],
        "pci_gpu_count": len(gpus),
        "ram_per_gpu_bytes": ram // len(gpus) if gpus else None,
        "thp_enabled": next(f.measured for f in findings if f.name == "thp enabled"),
        "thp_defrag": next(f.measured for f in findings if f.name == "thp defrag"),
    }
    summary = (
        f"RAM {format_size(ram)}, swap {format_size(swap_total)}, "
        f"THP enabled={data['thp_enabled']} defrag={data['thp_defrag']}"
    )
    return CheckResult.from_findings("memory", findings, data, summary=_if_clean(findings, summary))


CPU_SPEC = CheckSpec(
    id="cpu",
    title="CPU cores, governor, NUMA and DataLoader workers per rank",
    explain=(
        "Counts logical CPUs (/sys/devices/system/cpu/online) and physical cores (distinct "
        "package/die/core ids in cpu*/topology), reads SMT state, the cpufreq governor of "
        "every CPU (against cpu.governor), the NUMA nodes and their CPUs, and the NVIDIA "
        "GPUs on the PCI bus (one rank each). From these it derives how many DataLoader "
        "workers each rank can run: (physical cores - reserve_cores_per_rank x ranks) // "
        "ranks, and, when GPUs sit on several NUMA nodes, the same per node (ranks bound "
        "to their GPU's node; the most crowded node decides). Workers decode and augment "
        "on the CPU; too few cores per GPU, or cores clocked down by a powersave governor, "
        "starve the GPUs however fast they are."
    ),
    run=run_cpu,
    schema=CPU_SCHEMA,
    roles=("sysctl_tuning",),
)

MEMORY_SPEC = CheckSpec(
    id="memory",
    title="RAM, swap and transparent huge pages",
    explain=(
        "Measures RAM (MemTotal) against memory.min_ram and per NVIDIA GPU on the PCI bus "
        "against min_ram_per_gpu, swap size and use (/proc/meminfo, /proc/swaps) against "
        "allow_swap and max_swap_used, and the transparent huge page modes "
        "(/sys/kernel/mm/transparent_hugepage/enabled and defrag) against the allowed lists. "
        "Every DataLoader worker is a forked copy of the training process, pinned batches "
        "wait in RAM, and the page cache holds the dataset: swapping stalls workers, and "
        "THP defrag=always makes page faults compact memory synchronously, which shows up "
        "as random multi-millisecond stalls in the loader."
    ),
    run=run_memory,
    schema=MEMORY_SCHEMA,
    roles=("sysctl_tuning",),
)
