"""CUDA, cuDNN and driver versions as numbers ('12.4', '550.54.15', NVML's 12040, cuDNN's
90100), and whether a torch build for one CUDA release runs on an NVIDIA driver: the rules that
hostcheck's gpu check and the cuda_check role both apply. This file is shared: the collection
ships it as module_utils and the hostcheck package as hostcheck._shared (pyproject.toml), so it
uses the standard library only and runs on Python 3.6 (EL 8's python3).

The driver runs code built for its own CUDA release and every earlier one. Code built with a
later minor release of the same major runs through CUDA minor version compatibility when the
driver is at least the major's minimum below (without PTX JIT of newer code), from NVIDIA's
"CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version Compatibility" table
(docs.nvidia.com/deploy/cuda-compatibility)."""

import re

MINOR_COMPATIBLE_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*$")

RUNS = "runs"  # the driver's CUDA is at least torch's
MINOR = "minor"  # same major, driver new enough for minor version compatibility
TOO_OLD = "too_old"
UNKNOWN = "unknown"  # a version missing or unreadable


def parse_version(text):
    """'535.104.05' -> (535, 104, 5); None for anything that is not dotted digits."""
    if text is None or not _VERSION.match(str(text).strip()):
        return None
    return tuple(int(part) for part in str(text).strip().split("."))


def format_version(version):
    """(12, 4) -> '12.4'."""
    return ".".join(str(part) for part in version)


def cuda_from_int(number):
    """NVML, the CUDA driver API and CUDART_VERSION give 1000 * major + 10 * minor:
    12040 -> (12, 4)."""
    return number // 1000, (number % 1000) // 10


def cudnn_from_int(number):
    """cuDNN's version number (CUDNN_VERSION, torch.backends.cudnn.version()): from cuDNN 9 on
    10000 * major + 100 * minor + patch, 90100 -> (9, 1, 0); before, 1000 * major + 100 * minor
    + patch, 8902 -> (8, 9, 2)."""
    major_unit = 10000 if number >= 90000 else 1000
    return number // major_unit, (number % major_unit) // 100, number % 100


def at_least(have, want):
    width = max(len(have), len(want))
    return tuple(have) + (0,) * (width - len(have)) >= tuple(want) + (0,) * (width - len(want))


def torch_on_driver(torch_cuda, driver_cuda, driver_version):
    """(verdict, minimum driver for minor version compatibility or None) for a torch built
    for CUDA torch_cuda ('12.4') on a driver of version driver_version ('550.54.15') that
    supports CUDA driver_cuda ('12.4')."""
    wanted, have = parse_version(torch_cuda), parse_version(driver_cuda)
    if wanted is None or have is None:
        return UNKNOWN, None
    minimum = MINOR_COMPATIBLE_DRIVER.get(wanted[0])
    if at_least(have, wanted[:2]):
        return RUNS, minimum
    driver = parse_version(driver_version)
    if have[0] == wanted[0] and minimum and driver and at_least(driver, parse_version(minimum)):
        return MINOR, minimum
    return TOO_OLD, minimum
