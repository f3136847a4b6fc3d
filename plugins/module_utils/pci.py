"""What an NVIDIA PCI function is, from its sysfs vendor and class: the one rule that
hostcheck's gpu check and the nvidia_driver role's probe both apply. This file is shared: the
collection ships it as module_utils and the hostcheck package as hostcheck._shared
(pyproject.toml), so it uses the standard library only."""

import os

NVIDIA_VENDOR = 0x10DE
DISPLAY_CLASS = 0x03  # PCI base class "display controller": VGA 0x0300, 3D 0x0302
BRIDGE_OTHER = 0x0680  # NVSwitch: bridge, "other" subclass
GPU = "gpu"
NVSWITCH = "nvswitch"


def parse_hex(text):
    """'0x10de\\n' -> 0x10de; None for anything else."""
    if text is None:
        return None
    try:
        return int(text.strip(), 16)
    except ValueError:
        return None


def nvidia_kind(vendor, pci_class):
    """GPU for an NVIDIA display or 3D controller, NVSWITCH for an NVIDIA bridge of the
    "other" subclass, None for the rest (the GPUs' HDMI audio functions 0x0403 included)."""
    if vendor != NVIDIA_VENDOR or pci_class is None:
        return None
    if pci_class >> 16 == DISPLAY_CLASS:
        return GPU
    if pci_class >> 8 == BRIDGE_OTHER:
        return NVSWITCH
    return None


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def nvidia_functions(devices):
    """(address, kind, PCI class) of each NVIDIA GPU and NVSwitch in devices, a folder such as
    /sys/bus/pci/devices, in address order."""
    found = []
    for address in sorted(os.listdir(devices)) if os.path.isdir(devices) else []:
        base = os.path.join(devices, address)
        pci_class = parse_hex(_read(os.path.join(base, "class")))
        kind = nvidia_kind(parse_hex(_read(os.path.join(base, "vendor"))), pci_class)
        if kind is not None:
            found.append((address, kind, pci_class))
    return found
