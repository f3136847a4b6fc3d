#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Read-only probe of a host's NVIDIA hardware and driver state for the nvidia_driver role."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_driver_probe
short_description: Read what the nvidia_driver role needs to know about a host, change nothing
description:
  - NVIDIA GPUs (vendor 0x10de, display class 0x03) and NVSwitches (bridge class 0x0680) on
    the PCI bus from sysfs; no lspci, no driver needed.
  - The loaded nvidia module's version (/sys/module/nvidia/version), the version of the module
    built for the running kernel (modinfo), whether nouveau is loaded, the installed NVIDIA
    packages and which are held, the enabled nvidia-driver dnf module stream.
  - Secure Boot (mokutil --sb-state, else the EFI variable) and whether a MOK certificate is
    enrolled (mokutil --test-key); whether systemd runs; the initramfs tool.
options:
  root:
    description: Where the host's file system starts (tests point it at a fixture tree).
    type: path
    default: /
  mok_cert:
    description: Certificate to test for enrollment (empty for none).
    type: str
    default: ""
  mok_key:
    description: Private key that must exist on the host (empty for none).
    type: str
    default: ""
  nouveau_file:
    description: The modprobe.d file that blacklists nouveau, read back (under root; "" for none).
    type: str
    default: ""
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read the driver, its kernel module and the Secure Boot key (changes nothing)
  hostcheck.gpu_hosts.nvidia_driver_probe:
    mok_key: /var/lib/shim-signed/mok/MOK.priv
    mok_cert: /var/lib/shim-signed/mok/MOK.der
  register: driver
"""

RETURN = r"""
gpus:
  description: NVIDIA GPU functions, [{address, device, class}].
  type: list
  returned: always
nvswitches:
  description: NVSwitch functions, same shape.
  type: list
  returned: always
kernel:
  description: The running kernel (uname -r).
  type: str
  returned: always
loaded_version:
  description: Version of the loaded nvidia module, null when none is loaded.
  type: str
  returned: always
built_version:
  description: Version of the nvidia module installed for the running kernel (modinfo), or null.
  type: str
  returned: always
packages:
  description: Installed NVIDIA packages, name -> version.
  type: dict
  returned: always
held:
  description: Installed NVIDIA packages on hold (apt) or version-locked (dnf).
  type: list
  returned: always
driver_version:
  description: The driver version the packages carry (upstream part, the highest), or null.
  type: str
  returned: always
secure_boot:
  description: enabled, disabled, or unsupported (not booted with EFI / no Secure Boot).
  type: str
  returned: always
nouveau_blacklisted:
  description: >-
    Whether nouveau_file has a "blacklist nouveau" line (false when it is missing), null
    when no nouveau_file is given.
  type: bool
  returned: always
"""

import glob
import os
import re
import shutil
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.pci import (
    GPU,
    nvidia_functions,
)

EFI_SECURE_BOOT = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
PACKAGE_NAME = re.compile(r"^(lib)?nvidia|^cuda-drivers|^linux-modules-nvidia|^kmod-nvidia")
DRIVER_VERSION = re.compile(r"^(?:[0-9]+:)?([0-9]{3}\.[0-9]+(?:\.[0-9]+)?)")


def read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def run(argv: list[str]) -> tuple[int, str]:
    if shutil.which(argv[0]) is None:
        return 127, ""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def pci_devices(root: str) -> tuple[list[dict], list[dict]]:
    gpus, switches = [], []
    base = os.path.join(root, "sys/bus/pci/devices")
    for address, kind, pci_class in nvidia_functions(base):
        entry = {
            "address": address,
            "device": read(f"{base}/{address}/device"),
            "class": f"0x{pci_class:06x}",
        }
        (gpus if kind == GPU else switches).append(entry)
    return gpus, switches


def packages() -> tuple[dict, list[str]]:
    """Installed NVIDIA packages (name -> version) and the held ones."""
    found, held = {}, []
    code, out = run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Status}\n"])
    if code == 0:
        for line in out.splitlines():
            fields = line.split("\t")
            if len(fields) != 3 or not PACKAGE_NAME.search(fields[0]):
                continue
            status = fields[2].split()
            if len(status) == 3 and status[2] == "installed":
                found[fields[0]] = fields[1]
                if status[0] == "hold":
                    held.append(fields[0])
        return found, held
    code, out = run(["rpm", "-qa", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n"])
    if code == 0:
        for line in out.splitlines():
            name, dummy, version = line.partition("\t")
            if PACKAGE_NAME.search(name):
                found[name] = version
        code, out = run(["dnf", "-q", "versionlock", "list"])
        for line in out.splitlines() if code == 0 else []:
            spec = line.strip()
            for name in found:
                if spec.startswith(f"{name}-") and name not in held:
                    held.append(name)
    return found, sorted(held)


def dnf_stream() -> str | None:
    code, out = run(["dnf", "-q", "module", "list", "--enabled", "nvidia-driver"])
    if code != 0:
        return None
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nvidia-driver":
            return fields[1]
    return None


def secure_boot(root: str) -> str:
    dummy, out = run(["mokutil", "--sb-state"])
    if "SecureBoot enabled" in out:
        return "enabled"
    if "SecureBoot disabled" in out:
        return "disabled"
    try:
        with open(os.path.join(root, EFI_SECURE_BOOT), "rb") as handle:
            data = handle.read()
    except OSError:
        return "unsupported"
    # 4 bytes of attributes, then the value
    return "enabled" if len(data) >= 5 and data[4] == 1 else "disabled"


def mok_enrolled(cert: str) -> bool | None:
    if not cert:
        return None
    dummy, out = run(["mokutil", "--test-key", cert])
    if "is already enrolled" in out:
        return True
    if "is not enrolled" in out:
        return False
    return None


def blacklists_nouveau(root: str, path: str) -> bool | None:
    if not path:
        return None
    lines = (read(os.path.join(root, path.lstrip("/"))) or "").splitlines()
    return any(line.split() == ["blacklist", "nouveau"] for line in lines)


def probe(params: dict) -> dict:
    root = params["root"]
    gpus, switches = pci_devices(root)
    kernel = os.uname().release
    code, out = run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
    built = out.strip().splitlines()[0] if code == 0 and out.strip() else None
    found, held = packages()
    versions = sorted(
        {m.group(1) for m in (DRIVER_VERSION.match(v) for v in found.values()) if m},
        key=lambda v: [int(p) for p in v.split(".")],
    )
    tools = [t for t in ("update-initramfs", "dracut") if shutil.which(t)]
    mok = [p for p in (params["mok_key"], params["mok_cert"]) if p and not os.path.exists(p)]
    return {
        "gpus": gpus,
        "nvswitches": switches,
        "kernel": kernel,
        "kernels": sorted(
            os.path.basename(p) for p in glob.glob(os.path.join(root, "boot/vmlinuz-*"))
        ),
        "loaded_version": read(os.path.join(root, "sys/module/nvidia/version")),
        "built_version": built,
        "nouveau_loaded": os.path.isdir(os.path.join(root, "sys/module/nouveau")),
        "packages": found,
        "held": held,
        "driver_version": versions[-1] if versions else None,
        "dnf_stream": dnf_stream(),
        "secure_boot": secure_boot(root),
        "mok_enrolled": mok_enrolled(params["mok_cert"]),
        "mok_missing": mok,
        "systemd": os.path.isdir(os.path.join(root, "run/systemd/system")),
        "initramfs_tool": tools[0] if tools else None,
        "headers": os.path.isdir(os.path.join(root, f"lib/modules/{kernel}/build")),
        "nouveau_blacklisted": blacklists_nouveau(root, params["nouveau_file"]),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "mok_cert": {"type": "str", "default": ""},
            "mok_key": {"type": "str", "default": "", "no_log": False},
            "nouveau_file": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **probe(module.params))


if __name__ == "__main__":
    main()
