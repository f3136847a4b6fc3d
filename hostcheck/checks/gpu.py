"""NVIDIA driver and GPUs through NVML, and whether that driver can run torch's CUDA build.

NVML is reached only through the `pynvml` module (package nvidia-ml-py, hostcheck/gpu/nvml.py);
`run_with` takes that module as a parameter so tests pass a small fake in its place. torch is
never imported: hostcheck/gpu/torch_probe.py reads its CUDA version from its installed files.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hostcheck import config as c
from hostcheck._shared import cuda_compat
from hostcheck._shared.cuda_compat import at_least, cuda_from_int, format_version, parse_version
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.gpu import events as gpu_events
from hostcheck.gpu import nvml, xid
from hostcheck.gpu.torch_probe import TorchInfo, read_torch
from hostcheck.model import GPU_RESET, REBOOT, CheckResult, Finding, Status
from hostcheck.pci import PciGpu, nvidia_gpus, nvswitches

DRIVER_TAGS = "ansible-playbook site.yml --tags nvidia_driver"
DRIVER_FIX = f"set nvidia_driver_branch (role nvidia_driver) and run: {DRIVER_TAGS}"
PERSISTENCE_FIX = (
    f"set nvidia_driver_persistenced: true (role nvidia_driver) and run: {DRIVER_TAGS}"
)
VENV_FIX = "install a CUDA build of torch into training_venv (inventory group_vars)"
HARDWARE = "not fixable by a role variable: "
REPLACE = xid.REPLACE_REMEDY

SCHEMA = c.obj(
    {
        "min_driver_version": c.nullable({"type": "string", "pattern": r"^\d+(\.\d+)*$"}),
        "require_persistence": {"type": "boolean"},
        "require_ecc": {"type": "boolean"},
        "max_uncorrected_ecc_volatile": c.nullable({"type": "integer", "minimum": 0}),
        "max_uncorrected_ecc_aggregate": c.nullable({"type": "integer", "minimum": 0}),
        "clock_events_fail": {
            "type": "array",
            "uniqueItems": True,
            "items": {"enum": nvml.CLOCK_EVENT_NAMES},
        },
        "clock_events_warn": {
            "type": "array",
            "uniqueItems": True,
            "items": {"enum": nvml.CLOCK_EVENT_NAMES},
        },
        "training_venv": c.nullable({"type": "string", "minLength": 1}),
        "max_retired_pages": c.nullable({"type": "integer", "minimum": 0}),
        "nvlink_grace_seconds": {"type": "integer", "minimum": 0},
        "kernel_log": c.nullable({"type": "string", "pattern": "^/"}),
        "events_state": c.nullable({"type": "string", "pattern": "^/"}),
    }
)


# ---------------------------------------------------------------- per-GPU findings


def _link_findings(label: str, gpu: dict) -> list[Finding]:
    source = "nvmlDeviceGetCurr/MaxPcieLinkGeneration/Width"
    findings = []
    width, max_width = gpu["pcie_width"], gpu["pcie_max_width"]
    if width is None or max_width is None:
        findings.append(
            Finding(f"{label} pcie width", Status.SKIP, None, "", nvml.NOT_SUPPORTED, source)
        )
    else:
        findings.append(
            Finding(
                f"{label} pcie width",
                Status.PASS if width >= max_width else Status.FAIL,
                width,
                f"x{max_width}",
                f"x{width} of x{max_width}",
                source,
                HARDWARE + "a narrowed link is a seating, riser or slot (bifurcation) fault: "
                "reseat the GPU or check the slot in the BIOS",
            )
        )
    gen, max_gen = gpu["pcie_gen"], gpu["pcie_max_gen"]
    if gen is None or max_gen is None:
        findings.append(
            Finding(f"{label} pcie gen", Status.SKIP, None, "", nvml.NOT_SUPPORTED, source)
        )
        return findings
    idle = gpu["clock_events"] is not None and "gpu_idle" in gpu["clock_events"]
    status, note = Status.PASS, ""
    if gen < max_gen:
        status = Status.PASS if idle else Status.WARN
        note = (
            " (idle: the link slows down to save power and speeds up under load)"
            if idle
            else " (not idle: check the slot's PCIe speed in the BIOS)"
        )
    findings.append(
        Finding(
            f"{label} pcie gen",
            status,
            gen,
            f"Gen{max_gen} under load",
            f"Gen{gen} of Gen{max_gen}{note}",
            source,
            HARDWARE + "set the slot's PCIe speed to auto or the highest generation in the "
            "BIOS, then measure host-to-device bandwidth under load",
        )
    )
    return findings


def _ecc_findings(label: str, gpu: dict, cfg: dict) -> list[Finding]:
    source = "nvmlDeviceGetEccMode, nvmlDeviceGetTotalEccErrors"
    mode = gpu["ecc_enabled"]
    if mode is None:
        status = Status.FAIL if cfg["require_ecc"] else Status.SKIP
        return [
            Finding(
                f"{label} ecc",
                status,
                None,
                "on" if cfg["require_ecc"] else "",
                "ECC not supported",
                source,
                HARDWARE + "this GPU model has no ECC memory",
            )
        ]
    if not mode:
        return [
            Finding(
                f"{label} ecc",
                Status.FAIL if cfg["require_ecc"] else Status.PASS,
                "off",
                "on" if cfg["require_ecc"] else "",
                "ECC off",
                source,
                HARDWARE + "enable it with nvidia-smi -i <gpu> -e 1 and reboot",
            )
        ]
    counts = gpu["ecc_errors"]
    volatile = counts.get("volatile_uncorrected")
    aggregate = counts.get("aggregate_uncorrected")
    max_volatile = cfg["max_uncorrected_ecc_volatile"]
    max_aggregate = cfg["max_uncorrected_ecc_aggregate"]
    status = Status.PASS
    if max_aggregate is not None and aggregate is not None and aggregate > max_aggregate:
        status = Status.WARN  # history: may be retired pages or remapped rows
    if max_volatile is not None and volatile is not None and volatile > max_volatile:
        status = Status.FAIL  # since the driver loaded: this GPU is corrupting data now
    expected = []
    if max_volatile is not None:
        expected.append(f"volatile uncorrected <= {max_volatile}")
    if max_aggregate is not None:
        expected.append(f"aggregate uncorrected <= {max_aggregate}")
    return [
        Finding(
            f"{label} ecc",
            status,
            counts,
            ", ".join(expected),
            f"uncorrected {volatile} volatile / {aggregate} aggregate"
            f" (corrected {counts.get('volatile_corrected')} /"
            f" {counts.get('aggregate_corrected')})",
            source,
            HARDWARE + "drain the node, check nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT, "
            "reset the GPU (nvidia-smi -r) and replace it if errors return",
        )
    ]


def _clock_finding(label: str, gpu: dict, cfg: dict) -> Finding:
    source = "nvmlDeviceGetCurrentClocksEventReasons"
    events = gpu["clock_events"]
    if events is None:
        return Finding(f"{label} clocks", Status.SKIP, None, "", nvml.NOT_SUPPORTED, source)
    bad = [e for e in events if e in cfg["clock_events_fail"]]
    doubtful = [e for e in events if e in cfg["clock_events_warn"]]
    status = Status.FAIL if bad else (Status.WARN if doubtful else Status.PASS)
    return Finding(
        f"{label} clocks",
        status,
        events,
        "none of " + ", ".join(cfg["clock_events_fail"] + cfg["clock_events_warn"]),
        ", ".join(events) or "full speed",
        source,
        HARDWARE + "check cooling, airflow and power delivery "
        "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER)",
    )


def _on(gpu: dict) -> str:
    return f" on {gpu['bus_id']}" if gpu.get("bus_id") else ""


def _row_remap_finding(label: str, gpu: dict) -> Finding:
    source = "nvmlDeviceGetRemappedRows"
    rows = gpu["memory_repair"]["remapped_rows"]
    name = f"{label} row remapping"
    if rows is None:
        shown = "not supported (older GPUs retire pages)"
        return Finding(name, Status.SKIP, None, "", shown, source)
    shown = (
        f"{rows['corrected']} rows remapped after corrected, {rows['uncorrected']} after "
        "uncorrected errors"
    )
    if rows["failed"]:
        return Finding(
            name,
            Status.FAIL,
            rows,
            "no failed remap",
            f"a row remap failed{_on(gpu)}: {shown}",
            source,
            HARDWARE + "the GPU has no spare row left: " + xid.REPLACE_REMEDY,
        )
    if rows["pending"]:
        return Finding(
            name,
            Status.FAIL,
            rows,
            "no remap pending",
            f"a row remap is pending{_on(gpu)} until the GPU is reset (a GPU reset clears it); "
            + shown,
            source,
            HARDWARE + xid.RESET_REMEDY,
            cleared_by=GPU_RESET,
        )
    return Finding(name, Status.PASS, rows, "no remap pending or failed", shown, source)


def _retired_pages_finding(label: str, gpu: dict, cfg: dict) -> Finding:
    source = "nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPagesPendingStatus"
    pages = gpu["memory_repair"]["retired_pages"]
    name = f"{label} retired pages"
    if pages is None:
        return Finding(name, Status.SKIP, None, "", "not supported (newer GPUs remap rows)", source)
    total = pages["single_bit"] + pages["double_bit"]
    limit = cfg["max_retired_pages"]
    expected = f"<= {limit}, none pending" if limit is not None else "none pending"
    shown = (
        f"{total} pages retired ({pages['double_bit']} double-bit, "
        f"{pages['single_bit']} single-bit)"
    )
    if pages["pending"]:
        return Finding(
            name,
            Status.FAIL,
            pages,
            expected,
            f"a page retirement is pending{_on(gpu)} until the GPU is reset (a GPU reset or a "
            f"reboot clears it); {shown}",
            source,
            HARDWARE + xid.RESET_REMEDY,
            cleared_by=GPU_RESET,
        )
    if limit is not None and total > limit:
        return Finding(
            name, Status.FAIL, pages, expected, shown + _on(gpu), source, HARDWARE + REPLACE
        )
    return Finding(name, Status.PASS, pages, expected, shown, source)


def _nvlink_finding(
    label: str, gpu: dict, cfg: dict, uptime: float | None, switches: list[str]
) -> Finding:
    source = "nvmlDeviceGetNvLinkState"
    name = f"{label} nvlink"
    links, problem = gpu["nvlinks"], gpu["nvlink_problem"]
    if links is None:
        if problem:
            return Finding(name, Status.WARN, None, "", problem, source)
        return Finding(name, Status.SKIP, None, "", "no NVLink (a PCIe-only GPU)", source)
    down = [i for i, up in enumerate(links) if not up]
    count = len(links)
    expected = f"{count} of {count} up"
    if not down:
        return Finding(name, Status.PASS, count, expected, f"{count} of {count} links up", source)
    if len(down) == count and not switches:
        return Finding(
            name,
            Status.SKIP,
            0,
            "",
            f"none of {count} links up and no NVSwitch: no NVLink bridge fitted",
            source,
        )
    shown = f"{count - len(down)} of {count} links up{_on(gpu)}, down: " + ", ".join(
        str(i) for i in down
    )
    remedy = HARDWARE + xid.rule(74).remedy
    if uptime is not None and uptime < cfg["nvlink_grace_seconds"]:
        return Finding(
            name,
            Status.WARN,
            count - len(down),
            expected,
            shown + f" ({uptime:.0f} s after boot: links may still be training)",
            source,
            remedy,
        )
    return Finding(name, Status.FAIL, count - len(down), expected, shown, source, remedy)


_CLEARED_BY = {xid.GPU_RESET: GPU_RESET, xid.REBOOT: REBOOT}
_EVENT_STATUS = {xid.DRAIN: Status.FAIL, xid.WARN: Status.WARN, xid.JOB: Status.PASS}
_ACTION_ORDER = {xid.DRAIN: 0, xid.WARN: 1, xid.JOB: 2}


def _event_findings(ctx: CheckContext, labels: dict[str, str]) -> tuple[list[Finding], dict]:
    """One finding per GPU or NVSwitch with Xid or SXid events since boot (none: one passing
    finding), and what was read."""
    cfg = ctx.config
    source = cfg["kernel_log"]
    if source is None:
        return [], {}
    read = gpu_events.read_since_boot(ctx.system, source, cfg["events_state"])
    data = {"source": source, "kept": read.kept, "notes": read.notes, "events": read.events}
    where = f"{source} (NVRM Xid and nvswitch SXid messages)"
    if read.problem:
        shown = read.problem + " (root can; the health check and the timer run as root)"
        return [Finding("xid", Status.SKIP, None, "", shown, where)], data
    by_device: dict[str, list[dict]] = {}
    for event in read.events.values():
        by_device.setdefault(event["bus_id"], []).append(event)
    if not by_device:
        return [Finding("xid", Status.PASS, 0, "", "no Xid or SXid since boot", where)], data
    findings = []
    for bus, counted in sorted(by_device.items()):
        rules = [(xid.rule_of(e["kind"], e["code"], e["fatal"]), e) for e in counted]
        rules.sort(key=lambda pair: (_ACTION_ORDER[pair[0].action], pair[0].code))
        worst_rule = rules[0][0]
        switch = counted[0]["kind"] == "sxid"
        label = labels.get(bus) or ("nvswitch" if switch else "gpu")
        parts = [
            f"{'SXid' if event['kind'] == 'sxid' else 'Xid'} {rule.code} x{event['count']} "
            f"({rule.meaning})"
            for rule, event in rules
        ]
        display = "; ".join(parts) + f" on {bus} since boot"
        if worst_rule.action == xid.DRAIN and worst_rule.cleared_by:
            display += f" ({worst_rule.cleared_by} clears it)"
        findings.append(
            Finding(
                f"{label} {'sxid' if switch else 'xid'}",
                _EVENT_STATUS[worst_rule.action],
                {str(rule.code): event["count"] for rule, event in rules},
                "",
                display,
                where,
                (HARDWARE + worst_rule.remedy) if worst_rule.remedy else "",
                cleared_by=_CLEARED_BY.get(worst_rule.cleared_by, "")
                if worst_rule.action == xid.DRAIN
                else "",
            )
        )
    return findings, data


def _fabric_manager_finding(ctx: CheckContext, switches: list[str]) -> Finding | None:
    if not switches:
        return None
    done = ctx.system.run(["systemctl", "is-active", "nvidia-fabricmanager"])
    state = "unknown (no systemctl)" if done is None else (done.stdout.strip() or "unknown")
    return Finding(
        "fabric manager",
        Status.PASS if state == "active" else Status.FAIL,
        state,
        "active",
        f"nvidia-fabricmanager {state}, {len(switches)} NVSwitches on the PCI bus: "
        + ("GPUs can reach each other" if state == "active" else "CUDA cannot start on the GPUs"),
        "systemctl is-active nvidia-fabricmanager",
        "set nvidia_driver_fabric_manager: true (role nvidia_driver) and run: " + DRIVER_TAGS,
    )


def _uptime(ctx: CheckContext) -> float | None:
    text = ctx.system.read("/proc/uptime")
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def inspect_gpu(nv: Any, index: int, cfg: dict) -> tuple[dict, list[Finding]]:
    label = f"gpu{index}"
    handle, problem = nvml.ask(nv, "nvmlDeviceGetHandleByIndex", index)
    if problem is not None:
        # on the bus and counted, yet NVML cannot read it: no job can use it
        return {"index": index, "problem": problem}, [
            Finding(
                label,
                Status.FAIL,
                None,
                "readable through NVML",
                f"NVML cannot read it: {problem}",
                "nvmlDeviceGetHandleByIndex",
                HARDWARE + "the GPU does not answer: drain the node and check dmesg (Xid)",
            )
        ]
    gpu, persistence_problem = nvml.read_gpu(nv, index, handle)
    gpu["memory_repair"] = nvml.read_memory_repair(nv, handle)
    gpu["nvlinks"], gpu["nvlink_problem"] = nvml.read_nvlinks(nv, handle)
    wanted = cfg["require_persistence"]
    if gpu["persistence"] is None:
        persistence_finding = Finding(
            f"{label} persistence",
            Status.SKIP,
            None,
            "on" if wanted else "",
            persistence_problem or nvml.NOT_SUPPORTED,
            "nvmlDeviceGetPersistenceMode",
        )
    else:
        on = gpu["persistence"]
        persistence_finding = Finding(
            f"{label} persistence",
            Status.FAIL if wanted and not on else Status.PASS,
            "on" if on else "off",
            "on" if wanted else "",
            "on" if on else "off",
            "nvmlDeviceGetPersistenceMode",
            PERSISTENCE_FIX,
        )
    findings = [
        persistence_finding,
        *_link_findings(label, gpu),
        *_ecc_findings(label, gpu, cfg),
        _clock_finding(label, gpu, cfg),
        _row_remap_finding(label, gpu),
        _retired_pages_finding(label, gpu, cfg),
    ]
    return gpu, findings


# ---------------------------------------------------------------- driver and torch


def _torch_finding(
    torch: TorchInfo, driver_cuda: tuple[int, int] | None, driver: str | None
) -> Finding:
    name = "torch cuda"
    source = f"torch/version.py in {torch.where} (not imported)"
    if torch.version is None or torch.problem:
        return Finding(
            name,
            Status.WARN,
            None,
            "a CUDA build of torch",
            torch.problem or "torch not found",
            source,
            VENV_FIX,
        )
    if torch.cuda is None:
        build = f"ROCm {torch.hip}" if torch.hip else "CPU-only"
        return Finding(
            name,
            Status.FAIL,
            None,
            "a CUDA build of torch",
            f"torch {torch.version} is a {build} build",
            source,
            VENV_FIX,
        )
    parsed = parse_version(torch.cuda)
    if parsed is None:
        return Finding(name, Status.ERROR, torch.cuda, "", f"cannot parse {torch.cuda!r}", source)
    wanted = parsed[:2]
    expected = f"driver CUDA >= {format_version(wanted)}"
    remedy = (
        f"set nvidia_driver_branch to a branch supporting CUDA {format_version(wanted)} "
        f"(role nvidia_driver) and run: {DRIVER_TAGS}; or install a torch built for CUDA "
        f"<= {format_version(driver_cuda) if driver_cuda else '?'} into training_venv"
    )
    if driver_cuda is None:
        return Finding(
            name,
            Status.WARN,
            torch.cuda,
            expected,
            f"torch CUDA {torch.cuda}; the driver's CUDA version is unknown",
            source,
            remedy,
        )
    shown = f"torch CUDA {torch.cuda}, driver CUDA {format_version(driver_cuda)}"
    verdict, minimum = cuda_compat.torch_on_driver(torch.cuda, format_version(driver_cuda), driver)
    if verdict == cuda_compat.RUNS:
        return Finding(name, Status.PASS, torch.cuda, expected, shown, source, remedy)
    if verdict == cuda_compat.MINOR:
        return Finding(
            name,
            Status.WARN,
            torch.cuda,
            expected,
            shown + f": minor version compatibility only (driver {driver} >= {minimum}), "
            "kernels needing PTX JIT may fail",
            source,
            remedy,
        )
    too_old = f" (minor version compatibility needs driver >= {minimum})" if minimum else ""
    return Finding(
        name,
        Status.FAIL,
        torch.cuda,
        expected,
        shown + f": the driver {driver} is too old for this torch{too_old}",
        source,
        remedy,
    )


def _driver_finding(cfg: dict, driver: str | None, problem: str | None) -> Finding:
    source = "nvmlSystemGetDriverVersion"
    minimum = cfg["min_driver_version"]
    expected = f">= {minimum}" if minimum else ""
    if driver is None:
        return Finding("driver", Status.ERROR, None, expected, problem or "unknown", source)
    status = Status.PASS
    if minimum:
        have, want = parse_version(driver), parse_version(minimum)
        if have is None or want is None:
            status = Status.WARN
        else:
            status = Status.PASS if at_least(have, want) else Status.FAIL
    return Finding(
        "driver",
        status,
        driver,
        expected,
        driver,
        source,
        f"set nvidia_driver_branch to {minimum.split('.')[0] if minimum else 'a newer branch'}"
        " or newer (role nvidia_driver; role cuda_check enforces "
        f"cuda_check_min_driver_version) and run: {DRIVER_TAGS}",
    )


def _count_finding(count: int, pci: list[PciGpu]) -> Finding:
    missing = len(pci) - count
    return Finding(
        "gpus",
        Status.FAIL if missing > 0 else Status.PASS,
        count,
        f"{len(pci)} (NVIDIA GPUs on the PCI bus)" if pci else "",
        f"{count} visible to NVML"
        + (f", {len(pci)} on the PCI bus" if pci else "")
        + (f": {missing} missing" if missing > 0 else ""),
        "nvmlDeviceGetCount, /sys/bus/pci/devices",
        HARDWARE + "a GPU on the bus that the driver does not show has fallen off or "
        "failed to initialise: check dmesg for Xid errors and the nvidia-smi -q output",
    )


def _no_driver(
    ctx: CheckContext, reason: str, pci: list[PciGpu], torch: TorchInfo, code: int | None = None
) -> CheckResult:
    data = {"reason": reason, "pci_gpus": [g.to_dict() for g in pci], "torch": torch.to_dict()}
    if not pci and not ctx.require_gpu:
        return CheckResult.skipped(
            "gpu", f"no NVIDIA driver ({reason}) and no NVIDIA GPU on the PCI bus", data
        )
    why = (
        f"{len(pci)} NVIDIA GPU(s) on the PCI bus, none usable"
        if pci
        else "a GPU is required (--require-gpu or profile require_gpu)"
    )
    mismatch = code == nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    finding = Finding(
        "driver",
        Status.FAIL,
        reason,
        "NVIDIA driver loaded and NVML answering",
        f"{reason}; {why}",
        "pynvml.nvmlInit()",
        "reboot the node: the loaded kernel module is older than the driver's libraries"
        if mismatch
        else f"install the driver: {DRIVER_FIX}",
        cleared_by=REBOOT if mismatch else "",
    )
    findings = [finding]
    if pci:
        events, data["events"] = _event_findings(ctx, {g.address: "gpu" for g in pci})
        findings += events
    return CheckResult.from_findings("gpu", findings, data)


def run_with(ctx: CheckContext, nv: Any) -> CheckResult:
    """The check with NVML given as the `pynvml` module (or a stand-in for tests)."""
    torch = read_torch(ctx.system, ctx.config["training_venv"])
    pci = nvidia_gpus(ctx.system)
    if nv is None:
        return _no_driver(
            ctx, "pynvml (nvidia-ml-py) is not installed: pip install 'hostcheck[node]'", pci, torch
        )
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        return _no_driver(ctx, nvml.reason(exc), pci, torch, getattr(exc, "value", None))
    try:
        return _inspect(ctx, nv, pci, torch)
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _inspect(ctx: CheckContext, nv: Any, pci: list[PciGpu], torch: TorchInfo) -> CheckResult:
    cfg = ctx.config
    driver, driver_problem = nvml.ask(nv, "nvmlSystemGetDriverVersion")
    driver = None if driver is None else nvml.text(driver)
    cuda_int, _ = nvml.ask_first(
        nv, ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
    )
    driver_cuda = cuda_from_int(cuda_int) if cuda_int else None
    count, count_problem = nvml.ask(nv, "nvmlDeviceGetCount")
    findings = [_driver_finding(cfg, driver, driver_problem)]
    gpus = []
    if count is None:
        findings.append(
            Finding(
                "gpus", Status.ERROR, None, "", count_problem or "unknown", "nvmlDeviceGetCount"
            )
        )
        count = 0
    else:
        findings.append(_count_finding(count, pci))
    if count == 0 and not pci and count_problem is None:
        empty = f"the NVIDIA driver {driver} is loaded but shows no GPU"
        if not ctx.require_gpu:
            data = {"driver_version": driver, "nvml_gpu_count": 0, "torch": torch.to_dict()}
            return CheckResult.skipped("gpu", empty, data)
        findings[-1].status = Status.FAIL
        findings[-1].display = empty
    switches = nvswitches(ctx.system)
    uptime = _uptime(ctx)
    for index in range(count):
        gpu, gpu_findings = inspect_gpu(nv, index, cfg)
        gpus.append(gpu)
        findings.extend(gpu_findings)
        if "nvlinks" in gpu:
            findings.append(_nvlink_finding(f"gpu{index}", gpu, cfg, uptime, switches))
    labels = {g.address: "gpu" for g in pci}
    labels.update({g["bus_id"]: f"gpu{g['index']}" for g in gpus if g.get("bus_id")})
    event_findings, event_data = _event_findings(ctx, labels)
    findings.extend(event_findings)
    fabric = _fabric_manager_finding(ctx, switches)
    if fabric is not None:
        findings.append(fabric)
    findings.append(_torch_finding(torch, driver_cuda, driver))
    findings.append(
        Finding(
            "cudnn",
            Status.PASS if torch.cudnn else Status.SKIP,
            torch.cudnn,
            "",
            f"{torch.cudnn_package} {torch.cudnn}"
            if torch.cudnn
            else "no nvidia-cudnn-cu* wheel (bundled in torch, or a CPU build)",
            f"distribution metadata in {torch.where}",
        )
    )
    numa = {g.address: g.numa_node for g in pci}
    for gpu in gpus:
        gpu["numa_node"] = numa.get(gpu.get("bus_id"))
    data = {
        "driver_version": driver,
        "cuda_driver_version": format_version(driver_cuda) if driver_cuda else None,
        "nvml_gpu_count": count,
        "pci_gpus": [g.to_dict() for g in pci],
        "gpus": gpus,
        "nvswitches": switches,
        "events": event_data,
        "torch": torch.to_dict(),
    }
    bad = any(f.status in (Status.FAIL, Status.WARN, Status.ERROR) for f in findings)
    summary = None if bad else _summary(gpus, driver, driver_cuda, torch)
    return CheckResult.from_findings("gpu", findings, data, summary=summary)


def _summary(
    gpus: list[dict], driver: str | None, cuda: tuple[int, int] | None, torch: TorchInfo
) -> str:
    models: dict[str, int] = {}
    for gpu in gpus:
        models[gpu.get("name") or "unknown"] = models.get(gpu.get("name") or "unknown", 0) + 1
    shown = ", ".join(f"{n} x {name}" for name, n in models.items()) or "no GPU"
    return (
        f"{shown}; driver {driver} (CUDA {format_version(cuda) if cuda else '?'}); "
        f"torch {torch.version} CUDA {torch.cuda}"
    )


def run(ctx: CheckContext) -> CheckResult:
    return run_with(ctx, nvml.load_nvml())


SPEC = CheckSpec(
    id="gpu",
    title="NVIDIA driver, GPU health and torch CUDA compatibility",
    explain=(
        "Through NVML (pynvml): the driver version and the CUDA version it supports; per "
        "GPU its name, UUID, PCI bus id, persistence mode, PCIe link generation and width "
        "(current against the maximum of GPU and slot), ECC mode and uncorrected error "
        "counts, the current clock event (throttle) reasons, row remapping or retired pages, "
        "and its NVLinks; Fabric Manager where NVSwitches are on the bus; and the Xid (GPU) "
        "and SXid (NVSwitch) events of the kernel log since boot, each counted once "
        "(docs/gpu-faults.md). It reads torch's CUDA "
        "version from torch/version.py and cuDNN's from the nvidia-cudnn-cu* wheel without "
        "importing torch, and checks that the driver supports that CUDA. Host-to-device "
        "copies of every batch cross the PCIe link: an x8 link halves their bandwidth; "
        "without persistence mode each process start pays the driver's initialisation; a "
        "thermally throttled GPU or one the driver cannot serve makes the loader irrelevant."
    ),
    run=run,
    schema=SCHEMA,
    roles=("nvidia_driver", "cuda_check"),
)
