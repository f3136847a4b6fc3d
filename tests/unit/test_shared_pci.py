"""One rule for what an NVIDIA PCI function is (plugins/module_utils/pci.py): the nvidia_driver
role's probe and hostcheck's gpu check find the same GPUs on the same sysfs tree; the GPUs'
audio functions are neither's, NVSwitches only the probe's (it decides Fabric Manager)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hostcheck.pci import nvidia_gpus

REPO = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location(
    "nvidia_driver_probe_shared", REPO / "plugins/modules/nvidia_driver_probe.py"
)
probe = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe)

FUNCTIONS = {
    "0000:3b:00.0": ("0x10de", "0x030200", "0x2330"),  # H100: 3D controller
    "0000:3b:00.1": ("0x10de", "0x040300", "0x22a3"),  # its HDMI audio function
    "0000:5e:00.0": ("0x10de", "0x030000", "0x2684"),  # a VGA controller
    "0000:c1:00.0": ("0x10de", "0x068000", "0x22a3"),  # NVSwitch
    "0000:00:02.0": ("0x8086", "0x030000", "0x3e92"),  # another vendor's GPU
}


def test_the_probe_and_hostcheck_find_the_same_gpus(fake_host):
    for address, (vendor, pci_class, device) in FUNCTIONS.items():
        base = f"/sys/bus/pci/devices/{address}"
        fake_host.file(f"{base}/vendor", vendor + "\n")
        fake_host.file(f"{base}/class", pci_class + "\n")
        fake_host.file(f"{base}/device", device + "\n")
    gpus, switches = probe.pci_devices(str(fake_host.root))
    found = sorted(gpu.address for gpu in nvidia_gpus(fake_host.system()))
    assert [gpu["address"] for gpu in gpus] == found == ["0000:3b:00.0", "0000:5e:00.0"]
    assert [switch["address"] for switch in switches] == ["0000:c1:00.0"]
