"""NVIDIA driver and GPUs through NVML, and whether that driver can run torch's CUDA build.

NVML is reached only through the `pynvml` module (package nvidia-ml-py); `run_with` takes
that module as a parameter so tests pass a small fake in its place. torch is never
imported: its CUDA version comes from torch/version.py of the installed distribution.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hostcheck import config as c
from hostcheck._shared import cuda_compat
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.distinfo import normalize_name, parse_metadata
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.pci import PciGpu, nvidia_gpus
from hostcheck.system import System

DRIVER_TAGS = "ansible-playbook site.yml --tags nvidia_driver"
DRIVER_FIX = f"set nvidia_driver_branch (role nvidia_driver) and run: {DRIVER_TAGS}"
PERSISTENCE_FIX = (
    f"set nvidia_driver_persistenced: true (role nvidia_driver) and run: {DRIVER_TAGS}"
)
VENV_FIX = "install a CUDA build of torch into training_venv (inventory group_vars)"
HARDWARE = "not fixable by a role variable: "

# NVML ABI values (nvml.h). tests/unit/test_gpu.py checks them against the installed pynvml.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_FEATURE_ENABLED = 1

# nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*) bits.
CLOCK_EVENTS = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
CLOCK_EVENT_NAMES = list(CLOCK_EVENTS.values())
NOT_SUPPORTED = "not supported"

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
            "items": {"enum": CLOCK_EVENT_NAMES},
        },
        "clock_events_warn": {
            "type": "array",
            "uniqueItems": True,
            "items": {"enum": CLOCK_EVENT_NAMES},
        },
        "training_venv": c.nullable({"type": "string", "minLength": 1}),
    }
)


# ---------------------------------------------------------------- parsers (pure)


def parse_version(text: str) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); '12.1' -> (12, 1)."""
    parts = text.strip().split(".")
    if not parts or not all(p.isdigit() and p.isascii() for p in parts):
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


def format_version(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def cuda_from_int(value: int) -> tuple[int, int]:
    """NVML and the CUDA driver give 1000 * major + 10 * minor: 12040 -> (12, 4)."""
    return value // 1000, (value % 1000) // 10


def at_least(have: tuple[int, ...], want: tuple[int, ...]) -> bool:
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


def decode_clock_events(mask: int) -> list[str]:
    names = [name for bit, name in CLOCK_EVENTS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENTS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def normalize_bus_id(text: str | bytes) -> str:
    """NVML's '00000000:3B:00.0' as sysfs names it: '0000:3b:00.0'."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    text = text.strip().lower()
    domain, sep, rest = text.partition(":")
    if sep and rest.count(":") == 1 and re.fullmatch(r"[0-9a-f]+", domain):
        return f"{int(domain, 16):04x}:{rest}"
    return text


def parse_version_py(text: str) -> dict[str, Any]:
    """Literal assignments of a module such as torch/version.py, without running it:
    `cuda: Optional[str] = '12.1'` -> {'cuda': '12.1'}."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = literal
    return values


# ---------------------------------------------------------------- torch without import


@dataclass
class TorchInfo:
    where: str
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    cudnn: str | None = None  # version of the nvidia-cudnn-cu* wheel
    cudnn_package: str | None = None
    problem: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


_CUDNN = re.compile(r"^nvidia-cudnn-cu\d+$")


def _site_dists(paths: list[str]) -> tuple[str | None, str | None]:
    """torch's and cuDNN's .dist-info folders in these site folders, found by their names
    (name-version, normalized), so no other metadata is read."""
    torch = cudnn = None
    for site in paths:
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            name = normalize_name(entry[: -len(".dist-info")].rsplit("-", 1)[0])
            if name == "torch" and torch is None:
                torch = os.path.join(site, entry)
            elif _CUDNN.match(name) and cudnn is None:
                cudnn = os.path.join(site, entry)
    return torch, cudnn


def _metadata(dist_info: str) -> dict[str, str]:
    try:
        text = Path(dist_info, "METADATA").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return parse_metadata(text)


def read_torch(system: System, venv: str | None) -> TorchInfo:
    """torch's version and CUDA build from its distribution files, and cuDNN's wheel."""
    if venv:
        where = venv
        sites = system.glob(f"{venv.rstrip('/')}/lib/python3*/site-packages")
        if not sites:
            return TorchInfo(where, problem=f"no lib/python3*/site-packages under {venv}")
        torch, cudnn = _site_dists([str(system.path(s)) for s in sites])
    else:
        where = "the Python running hostcheck"
        torch, cudnn = _site_dists([p for p in sys.path if p and os.path.isdir(p)])
    info = TorchInfo(where)
    if cudnn is not None:
        metadata = _metadata(cudnn)
        info.cudnn = metadata.get("Version")
        info.cudnn_package = normalize_name(metadata.get("Name") or "")
    if torch is None:
        info.problem = f"torch is not installed in {where}"
        return info
    info.version = _metadata(torch).get("Version")
    try:
        text = Path(os.path.dirname(torch), "torch", "version.py").read_text(errors="replace")
    except OSError as exc:
        info.problem = f"cannot read torch/version.py: {exc.strerror or exc}"
        return info
    values = parse_version_py(text)
    for key in ("cuda", "hip"):
        value = values.get(key)
        setattr(info, key, value if isinstance(value, str) else None)
    return info


# ---------------------------------------------------------------- NVML


def load_nvml() -> Any:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _reason(exc: Exception) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ asks the library, which may be gone
        text = type(exc).__name__
    code = getattr(exc, "value", None)
    return f"{text} (NVML error {code})" if code is not None else text


def ask(nv: Any, function: str, *args: Any) -> tuple[Any, str | None]:
    """(value, None), or (None, why): NOT_SUPPORTED when the GPU, driver or pynvml lacks it."""
    call = getattr(nv, function, None)
    if call is None:
        return None, NOT_SUPPORTED
    try:
        return call(*args), None
    except nv.NVMLError as exc:
        if getattr(exc, "value", None) in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND):
            return None, NOT_SUPPORTED
        return None, _reason(exc)


def ask_first(nv: Any, functions: tuple[str, ...], *args: Any) -> tuple[Any, str | None]:
    """The first of several equivalent calls that answers (newer names first)."""
    problem = None
    for function in functions:
        value, problem = ask(nv, function, *args)
        if problem is None:
            return value, None
    return None, problem


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------- per-GPU findings


def _link_findings(label: str, gpu: dict) -> list[Finding]:
    source = "nvmlDeviceGetCurr/MaxPcieLinkGeneration/Width"
    findings = []
    width, max_width = gpu["pcie_width"], gpu["pcie_max_width"]
    if width is None or max_width is None:
        findings.append(
            Finding(f"{label} pcie width", Status.SKIP, None, "", NOT_SUPPORTED, source)
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
        findings.append(Finding(f"{label} pcie gen", Status.SKIP, None, "", NOT_SUPPORTED, source))
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
        return Finding(f"{label} clocks", Status.SKIP, None, "", NOT_SUPPORTED, source)
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


def inspect_gpu(nv: Any, index: int, cfg: dict) -> tuple[dict, list[Finding]]:
    label = f"gpu{index}"
    handle, problem = ask(nv, "nvmlDeviceGetHandleByIndex", index)
    if problem is not None:
        return {"index": index, "problem": problem}, [
            Finding(
                label,
                Status.ERROR,
                None,
                "",
                problem,
                "nvmlDeviceGetHandleByIndex",
                HARDWARE + "the GPU does not answer: drain the node and check dmesg (Xid)",
            )
        ]
    name, _ = ask(nv, "nvmlDeviceGetName", handle)
    uuid, _ = ask(nv, "nvmlDeviceGetUUID", handle)
    pci, _ = ask(nv, "nvmlDeviceGetPciInfo", handle)
    persistence, persistence_problem = ask(nv, "nvmlDeviceGetPersistenceMode", handle)
    events_mask, _ = ask_first(
        nv,
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        handle,
    )
    ecc_mode, _ = ask(nv, "nvmlDeviceGetEccMode", handle)
    gpu: dict[str, Any] = {
        "index": index,
        "name": None if name is None else _text(name),
        "uuid": None if uuid is None else _text(uuid),
        "bus_id": None if pci is None else normalize_bus_id(getattr(pci, "busId", "")),
        "persistence": None if persistence is None else persistence == NVML_FEATURE_ENABLED,
        "pcie_gen": ask(nv, "nvmlDeviceGetCurrPcieLinkGeneration", handle)[0],
        "pcie_max_gen": ask(nv, "nvmlDeviceGetMaxPcieLinkGeneration", handle)[0],
        "pcie_gpu_max_gen": ask(nv, "nvmlDeviceGetGpuMaxPcieLinkGeneration", handle)[0],
        "pcie_width": ask(nv, "nvmlDeviceGetCurrPcieLinkWidth", handle)[0],
        "pcie_max_width": ask(nv, "nvmlDeviceGetMaxPcieLinkWidth", handle)[0],
        "clock_events_mask": events_mask,
        "clock_events": None if events_mask is None else decode_clock_events(events_mask),
        "ecc_enabled": None if ecc_mode is None else ecc_mode[0] == NVML_FEATURE_ENABLED,
        "ecc_errors": {},
    }
    if gpu["ecc_enabled"]:
        for counter_name, counter in (
            ("volatile", NVML_VOLATILE_ECC),
            ("aggregate", NVML_AGGREGATE_ECC),
        ):
            for kind_name, kind in (
                ("uncorrected", NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
                ("corrected", NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ):
                value, _ = ask(nv, "nvmlDeviceGetTotalEccErrors", handle, kind, counter)
                gpu["ecc_errors"][f"{counter_name}_{kind_name}"] = value

    wanted = cfg["require_persistence"]
    if persistence is None:
        persistence_finding = Finding(
            f"{label} persistence",
            Status.SKIP,
            None,
            "on" if wanted else "",
            persistence_problem or NOT_SUPPORTED,
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
    try:
        wanted = parse_version(torch.cuda)[:2]
    except ValueError:
        return Finding(name, Status.ERROR, torch.cuda, "", f"cannot parse {torch.cuda!r}", source)
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
        try:
            status = (
                Status.PASS
                if at_least(parse_version(driver), parse_version(minimum))
                else Status.FAIL
            )
        except ValueError:
            status = Status.WARN
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
        f"{count} visible to NVML" + (f", {len(pci)} on the PCI bus" if pci else ""),
        "nvmlDeviceGetCount, /sys/bus/pci/devices",
        HARDWARE + "a GPU on the bus that the driver does not show has fallen off or "
        "failed to initialise: check dmesg for Xid errors and the nvidia-smi -q output",
    )


def _no_driver(ctx: CheckContext, reason: str, pci: list[PciGpu], torch: TorchInfo) -> CheckResult:
    data = {"reason": reason, "pci_gpus": [g.to_dict() for g in pci], "torch": torch.to_dict()}
    if not pci and not ctx.require_gpu:
        return CheckResult.skipped(
            "gpu", f"no NVIDIA driver ({reason}) and no NVIDIA GPU on the PCI bus", data
        )
    why = (
        f"{len(pci)} NVIDIA GPU(s) on the PCI bus"
        if pci
        else "a GPU is required (--require-gpu or profile require_gpu)"
    )
    finding = Finding(
        "driver",
        Status.FAIL,
        reason,
        "NVIDIA driver loaded and NVML answering",
        f"{reason}; {why}",
        "pynvml.nvmlInit()",
        f"install the driver: {DRIVER_FIX}",
    )
    return CheckResult.from_findings("gpu", [finding], data)


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
        return _no_driver(ctx, _reason(exc), pci, torch)
    try:
        return _inspect(ctx, nv, pci, torch)
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _inspect(ctx: CheckContext, nv: Any, pci: list[PciGpu], torch: TorchInfo) -> CheckResult:
    cfg = ctx.config
    driver, driver_problem = ask(nv, "nvmlSystemGetDriverVersion")
    driver = None if driver is None else _text(driver)
    cuda_int, _ = ask_first(
        nv, ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
    )
    driver_cuda = cuda_from_int(cuda_int) if cuda_int else None
    count, count_problem = ask(nv, "nvmlDeviceGetCount")
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
    for index in range(count):
        gpu, gpu_findings = inspect_gpu(nv, index, cfg)
        gpus.append(gpu)
        findings.extend(gpu_findings)
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
    return run_with(ctx, load_nvml())


SPEC = CheckSpec(
    id="gpu",
    title="NVIDIA driver, GPU health and torch CUDA compatibility",
    explain=(
        "Through NVML (pynvml): the driver version and the CUDA version it supports; per "
        "GPU its name, UUID, PCI bus id, persistence mode, PCIe link generation and width "
        "(current against the maximum of GPU and slot), ECC mode and uncorrected error "
        "counts, and the current clock event (throttle) reasons. It reads torch's CUDA "
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
