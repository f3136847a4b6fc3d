"""NVIDIA GPUs as the PCI bus sees them (sysfs), with no driver or NVML needed."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hostcheck._shared import pci as shared_pci
from hostcheck._shared.pci import parse_hex
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


def is_nvidia_gpu(vendor: int | None, pci_class: int | None) -> bool:
    """NVIDIA vendor and a display-controller class (plugins/module_utils/pci.py, the rule
    the nvidia_driver role's probe applies too)."""
    return shared_pci.nvidia_kind(vendor, pci_class) == shared_pci.GPU


def nvidia_gpus(system: System) -> list[PciGpu]:
    """Every NVIDIA display/3D controller function under /sys/bus/pci/devices."""
    found = []
    for address in system.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{address}"
        pci_class = parse_hex(system.read_value(f"{base}/class"))
        if not is_nvidia_gpu(parse_hex(system.read_value(f"{base}/vendor")), pci_class):
            continue
        numa = system.read_int(f"{base}/numa_node")
        found.append(
            PciGpu(
                address=address,
                device_id=parse_hex(system.read_value(f"{base}/device")) or 0,
                pci_class=pci_class or 0,
                numa_node=-1 if numa is None else numa,
                driver=driver_from_uevent(system.read(f"{base}/uevent")),
            )
        )
    return found
