"""One rule for what an NVIDIA PCI function is (plugins/module_utils/pci.py): the nvidia_driver
role's probe, the hostcheck role's probe and hostcheck's gpu check find the same GPUs on the same
sysfs tree (any display-class function, 0x03xx, "other" 0x0380 included); the GPUs' audio
functions are no one's, NVSwitches only the nvidia_driver probe's (it decides Fabric Manager)."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.modules import (
    hostcheck_probe as HOSTCHECK_PROBE,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import nvidia_driver_probe as probe
from hostcheck._shared import pci
from hypothesis import given
from hypothesis import strategies as st

from hostcheck.pci import nvidia_gpus

GPU_OTHER = "0000:86:00.0"
FUNCTIONS = {
    "0000:3b:00.0": ("0x10de", "0x030200", "0x2330"),  # H100: 3D controller
    "0000:3b:00.1": ("0x10de", "0x040300", "0x22a3"),  # its HDMI audio function
    "0000:5e:00.0": ("0x10de", "0x030000", "0x2684"),  # a VGA controller
    "0000:c1:00.0": ("0x10de", "0x068000", "0x22a3"),  # NVSwitch
    "0000:00:02.0": ("0x8086", "0x030000", "0x3e92"),  # another vendor's GPU
    GPU_OTHER: ("0x10de", "0x038000", "0x1db6"),  # display controller, "other" subclass
}


def test_the_probe_and_hostcheck_find_the_same_gpus(fake_host):
    for address, (vendor, pci_class, device) in FUNCTIONS.items():
        base = f"/sys/bus/pci/devices/{address}"
        fake_host.file(f"{base}/vendor", vendor + "\n")
        fake_host.file(f"{base}/class", pci_class + "\n")
        fake_host.file(f"{base}/device", device + "\n")
    gpus, switches = probe.pci_devices(str(fake_host.root))
    found = sorted(gpu.address for gpu in nvidia_gpus(fake_host.system()))
    assert [gpu["address"] for gpu in gpus] == found == ["0000:3b:00.0", "0000:5e:00.0", GPU_OTHER]
    assert HOSTCHECK_PROBE.nvidia_gpu_count(str(fake_host.root)) == len(found)
    assert [switch["address"] for switch in switches] == ["0000:c1:00.0"]


@given(st.text(max_size=30))
def test_pci_hex_parser_never_crashes(text):
    value = pci.parse_hex(text)
    assert value is None or isinstance(value, int)


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFF))
def test_only_nvidia_display_class_is_a_gpu(vendor, cls):
    expected = vendor == 0x10DE and (cls >> 16) == 0x03
    assert (pci.nvidia_kind(vendor, cls) == pci.GPU) == expected
