"""NVIDIA GPUs as the PCI bus sees them (sysfs), with no driver or NVML needed."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hostcheck.system import System

NVIDIA_VENDOR = 0x10DE
DISPLAY_CLASS = 0x03  # PCI base class "display controller": VGA 0x0300, 3D 0x0302
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


def parse_hex(text: str | None) -> int | None:
    """'0x10de\\n' -> 0x10de; None for anything else."""
    if text is None:
        return None
    try:
        return int(text.strip(), 16)
    except ValueError:
        return None


def driver_from_uevent(text: str | None) -> str | None:
    for line in (text or "").splitlines():
        key, _, value = line.partition("=")
        if key == "DRIVER" and value:
            return value.strip()
    return None


def is_nvidia_gpu(vendor: int | None, pci_class: int | None) -> bool:
    """NVIDIA vendor and a display-controller class; excludes the GPUs' HDMI audio
    functions (0x0403) and NVSwitch bridges (0x0680)."""
    if vendor != NVIDIA_VENDOR or pci_class is None:
        return False
    return pci_class >> 16 == DISPLAY_CLASS


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
