"""NVIDIA GPUs as the PCI bus sees them (sysfs), with no driver or NVML needed."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hostcheck._shared.pci import GPU, NVSWITCH, nvidia_functions, parse_hex
from hostcheck.system import System

PCI_DEVICES = "/sys/bus/pci/devices"


@dataclass(frozen=True)
class PciGpu:
    address: str  # 0000:3b:00.0
    device_id: int
    pci_class: int
    numa_node: int  # -1 when the platform does not say
    driver: str | None  # nvidia, vfio-pci, nouveau, or None when unbound

    def to_dict(self) -> dict:
        data = asdict(self)
        data["device_id"] = f"0x{self.device_id:04x}"
        data["pci_class"] = f"0x{self.pci_class:06x}"
        return data


def driver_from_uevent(text: str | None) -> str | None:
    for line in (text or "").splitlines():
        key, _, value = line.partition("=")
        if key == "DRIVER" and value:
            return value.strip()
    return None


def nvidia_gpus(system: System) -> list[PciGpu]:
    """Every NVIDIA GPU function under /sys/bus/pci/devices (plugins/module_utils/pci.py says
    which are GPUs, for the nvidia_driver role's probe too)."""
    found = []
    for address, kind, pci_class in nvidia_functions(str(system.path(PCI_DEVICES))):
        if kind != GPU:
            continue
        base = f"{PCI_DEVICES}/{address}"
        numa = system.read_int(f"{base}/numa_node")
        found.append(
            PciGpu(
                address=address,
                device_id=parse_hex(system.read_value(f"{base}/device")) or 0,
                pci_class=pci_class,
                numa_node=-1 if numa is None else numa,
                driver=driver_from_uevent(system.read(f"{base}/uevent")),
            )
        )
    return found


def nvswitches(system: System) -> list[str]:
    """The PCI addresses of the NVIDIA NVSwitches on the bus (HGX and DGX baseboards)."""
    return [
        address
        for address, kind, _ in nvidia_functions(str(system.path(PCI_DEVICES)))
        if kind == NVSWITCH
    ]
