"""NVML through the `pynvml` module (package nvidia-ml-py), which the caller passes in as `nv`
so tests give a small fake in its place: its ABI values, the calls that may be missing from a
GPU, driver or pynvml, and what its answers mean."""

from __future__ import annotations

import re
from typing import Any

# NVML ABI values (nvml.h). tests/unit/hostcheck/checks/test_gpu.py checks them against the
# installed pynvml.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
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


def load_nvml() -> Any:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def reason(exc: Exception) -> str:
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
        return None, reason(exc)


def ask_first(nv: Any, functions: tuple[str, ...], *args: Any) -> tuple[Any, str | None]:
    """The first of several equivalent calls that answers (newer names first)."""
    problem = None
    for function in functions:
        value, problem = ask(nv, function, *args)
        if problem is None:
            return value, None
    return None, problem


def text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def decode_clock_events(mask: int) -> list[str]:
    names = [name for bit, name in CLOCK_EVENTS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENTS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def normalize_bus_id(bus_id: str | bytes) -> str:
    """NVML's '00000000:3B:00.0' as sysfs names it: '0000:3b:00.0'."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode(errors="replace")
    bus_id = bus_id.strip().lower()
    domain, sep, rest = bus_id.partition(":")
    if sep and rest.count(":") == 1 and re.fullmatch(r"[0-9a-f]+", domain):
        return f"{int(domain, 16):04x}:{rest}"
    return bus_id


def read_gpu(nv: Any, index: int, handle: Any) -> tuple[dict, str | None]:
    """What NVML says of one GPU (None where it does not say), and why its persistence mode is
    unknown (None when known)."""
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
        "name": None if name is None else text(name),
        "uuid": None if uuid is None else text(uuid),
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
    return gpu, persistence_problem


NVML_ERROR_INVALID_ARGUMENT = 2
RETIRED_AFTER_SINGLE_BIT_ERRORS = 0  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
RETIRED_AFTER_DOUBLE_BIT_ERROR = 1  # NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
NVML_NVLINK_MAX_LINKS = 36  # nvml.h of R570 (Blackwell); older GPUs answer fewer


def read_memory_repair(nv: Any, handle: Any) -> dict:
    """Row remapping (Ampere and newer) and page retirement (Volta and older): None where the
    GPU has not the one or the other."""
    rows, _ = ask(nv, "nvmlDeviceGetRemappedRows", handle)
    repair: dict[str, Any] = {"remapped_rows": None, "retired_pages": None}
    if rows is not None:
        corrected, uncorrected, pending, failed = rows
        repair["remapped_rows"] = {
            "corrected": corrected,
            "uncorrected": uncorrected,
            "pending": bool(pending),
            "failed": bool(failed),
        }
    single, _ = ask(nv, "nvmlDeviceGetRetiredPages", handle, RETIRED_AFTER_SINGLE_BIT_ERRORS)
    double, _ = ask(nv, "nvmlDeviceGetRetiredPages", handle, RETIRED_AFTER_DOUBLE_BIT_ERROR)
    if single is not None or double is not None:
        pending, _ = ask(nv, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
        repair["retired_pages"] = {
            "single_bit": len(single or []),
            "double_bit": len(double or []),
            "pending": pending == NVML_FEATURE_ENABLED,
        }
    return repair


def read_nvlinks(nv: Any, handle: Any) -> tuple[list[bool] | None, str | None]:
    """Whether each of the GPU's NVLinks is up, in link order (None for a GPU without NVLink),
    and why the links could not be read. NVML answers 'invalid argument' or 'not supported'
    past the GPU's last link."""
    links: list[bool] = []
    call = getattr(nv, "nvmlDeviceGetNvLinkState", None)
    if call is None:
        return None, None
    for link in range(NVML_NVLINK_MAX_LINKS):
        try:
            links.append(call(handle, link) == NVML_FEATURE_ENABLED)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) in (
                NVML_ERROR_NOT_SUPPORTED,
                NVML_ERROR_INVALID_ARGUMENT,
                NVML_ERROR_FUNCTION_NOT_FOUND,
            ):
                break
            return links or None, f"link {link}: {reason(exc)}"
    return links or None, None
