"""Print, as one JSON object, what this host says of its NVIDIA driver and CUDA (role cuda_check).

Run by the training venv's python, so that `import torch` and `import pynvml` see what training
jobs see. Reads only: NVML through pynvml (package nvidia-ml-py), /proc/driver/nvidia/version,
the NVIDIA functions under /sys/bus/pci/devices, CUDA toolkits' version.json / version.txt, cuDNN
headers and library file names, and torch's build metadata. Nothing here initialises CUDA (no
torch.cuda call): a host whose GPUs are busy or broken still answers.

It reports readings as they come: NVML's and CUDART_VERSION's CUDA numbers (12040), torch's cuDNN
number (90100), each NVIDIA PCI function's class. What they mean (12.4, 9.1.0, which functions
are GPUs) is the cuda_check_verify action's to say (plugins/plugin_utils/cuda_check_rules.py,
with module_utils' cuda_compat and pci rules).

Standard library, pynvml and torch only; Python 3.6 and later (the OS python of EL 8 runs it
when the venv has no python yet).
"""

import argparse
import contextlib
import glob
import json
import os
import re
import sys

KERNEL_MODULE = "/proc/driver/nvidia/version"
PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ..." and the open
# modules' "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build".
_MODULE_VERSION = re.compile(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)")
_DEFINE = re.compile(r"^\s*#\s*define\s+CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)", re.MULTILINE)
_VERSION_TXT = re.compile(r"CUDA Version\s+(\d+(?:\.\d+)*)")
RUNTIME_HEADER = "include/cuda_runtime_api.h"
_CUDART_VERSION = re.compile(r"^\s*#\s*define\s+CUDART_VERSION\s+(\d+)", re.MULTILINE)
# libcudnn.so.9 and libcudnn.so.9.1.0 (not libcudnn_ops.so.9: the main library names cuDNN).
_CUDNN_LIBRARY = re.compile(r"^libcudnn\.so\.(\d+(?:\.\d+)*)$")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def text(value):
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def nvml_facts():
    found = {
        "loaded": False,
        "driver_version": None,
        "cuda_driver_version": None,
        "gpu_count": None,
        "error": None,
        "problems": [],
    }
    try:
        import pynvml
    except ImportError as exc:
        found["error"] = f"pynvml (nvidia-ml-py) cannot be imported by {sys.executable}: {exc}"
        return found
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        found["error"] = text(exc)
        return found
    found["loaded"] = True
    try:
        calls = (
            ("driver_version", ("nvmlSystemGetDriverVersion",), text),
            (
                "cuda_driver_version",
                ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
                int,
            ),
            ("gpu_count", ("nvmlDeviceGetCount",), int),
        )
        for key, functions, convert in calls:
            errors = []
            for function in functions:
                call = getattr(pynvml, function, None)
                if call is None:
                    errors.append(f"{function}: not in this pynvml")
                    continue
                try:
                    found[key] = convert(call())
                    break
                except pynvml.NVMLError as exc:
                    errors.append(f"{function}: {text(exc)}")
            if found[key] is None:
                found["problems"].append("; ".join(errors))
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    return found


def kernel_module_facts(path):
    content = read(path)
    if content is None:
        return {"loaded": False, "version": None}
    match = _MODULE_VERSION.search(content)
    return {"loaded": True, "version": match.group(1) if match else None}


def nvidia_pci_functions(devices):
    """Address, vendor and class of each NVIDIA function under devices, as sysfs gives them."""
    found = []
    for device in sorted(glob.glob(os.path.join(devices, "*"))):
        vendor = (read(os.path.join(device, "vendor")) or "").strip()
        if vendor.lower() == NVIDIA_VENDOR:
            klass = read(os.path.join(device, "class"))
            found.append(
                {
                    "address": os.path.basename(device),
                    "vendor": vendor,
                    "class": klass.strip() if klass is not None else None,
                }
            )
    return found


def toolkit_version(folder):
    """{version, cudart_version, source: the file they come from}: version.json (CUDA 11.1 and
    later) or version.txt (older) give the version's text; else include/cuda_runtime_api.h its
    CUDART_VERSION number, 13000 (toolkits put together from the nvidia-cuda-* wheels have no
    version file)."""
    data = read(os.path.join(folder, "version.json"))
    if data is not None:
        try:
            version = json.loads(data)["cuda"]["version"]
        except (ValueError, KeyError, TypeError):
            version = None
        if isinstance(version, str) and version:
            return {"version": version, "cudart_version": None, "source": "version.json"}
    match = _VERSION_TXT.search(read(os.path.join(folder, "version.txt")) or "")
    if match:
        return {"version": match.group(1), "cudart_version": None, "source": "version.txt"}
    match = _CUDART_VERSION.search(read(os.path.join(folder, RUNTIME_HEADER)) or "")
    if match:
        return {"version": None, "cudart_version": int(match.group(1)), "source": RUNTIME_HEADER}
    return {"version": None, "cudart_version": None, "source": None}


def is_toolkit(folder):
    names = ("version.json", "version.txt", RUNTIME_HEADER)
    return any(os.path.isfile(os.path.join(folder, n)) for n in names)


def toolkits(parents):
    """Each parent folder is a toolkit itself, or holds cuda/ and cuda-*/ toolkits."""
    found, seen = [], set()
    for parent in parents:
        if is_toolkit(parent):
            candidates = [parent]
        else:
            candidates = sorted(glob.glob(os.path.join(parent, "cuda-*")))
            candidates.append(os.path.join(parent, "cuda"))
        for folder in candidates:
            if folder in seen or not os.path.isdir(folder):
                continue
            seen.add(folder)
            found.append(
                {"path": folder, "real_path": os.path.realpath(folder), **toolkit_version(folder)}
            )
    return found


def header_version(content):
    fields = dict(_DEFINE.findall(content))
    if "MAJOR" not in fields:
        return None
    return ".".join(fields.get(k, "0") for k in ("MAJOR", "MINOR", "PATCHLEVEL"))


def cudnn_headers(folders):
    """cudnn_version.h (cuDNN 8 and later; cudnn_version_v9.h where alternatives manage it),
    else cudnn.h (cuDNN 7 and older keep the version there)."""
    found, seen = [], set()
    for folder in folders:
        names = [
            "cudnn_version.h",
            *sorted(
                os.path.basename(p) for p in glob.glob(os.path.join(folder, "cudnn_version_v*.h"))
            ),
        ]
        paths = [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
        if not paths and os.path.isfile(os.path.join(folder, "cudnn.h")):
            paths = [os.path.join(folder, "cudnn.h")]
        for path in paths:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            found.append({"path": path, "version": header_version(read(path) or "")})
    return found


def cudnn_libraries(folders):
    """libcudnn.so.N files, one entry per real file, its version from the longest name."""
    by_real = {}
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "libcudnn.so.*"))):
            if not os.path.isfile(path):
                continue  # a dangling link
            real = os.path.realpath(path)
            entry = by_real.setdefault(real, {"path": real, "names": [], "version": None})
            entry["names"].append(path)
            for name in (os.path.basename(real), os.path.basename(path)):
                match = _CUDNN_LIBRARY.match(name)
                if match and len(match.group(1)) > len(entry["version"] or ""):
                    entry["version"] = match.group(1)
    return list(by_real.values())


def torch_facts():
    found = {
        "version": None,
        "cuda": None,
        "hip": None,
        "cudnn": None,
        "error": None,
        "cudnn_error": None,
    }
    try:
        import torch
    except Exception as exc:  # a broken install raises more than ImportError
        found["error"] = f"import torch failed in {sys.executable}: {type(exc).__name__}: {exc}"
        return found
    found["version"] = text(getattr(torch, "__version__", None))
    build = getattr(torch, "version", None)
    for key in ("cuda", "hip"):
        value = getattr(build, key, None)
        found[key] = text(value) if value else None
    try:
        from torch.backends import cudnn

        number = cudnn.version()  # the linked cuDNN's version; loads no CUDA context
    except Exception as exc:
        found["cudnn_error"] = f"torch.backends.cudnn.version(): {type(exc).__name__}: {exc}"
        number = None
    if isinstance(number, int):
        found["cudnn"] = number
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolkit-path", action="append", default=[])
    parser.add_argument("--cudnn-include-path", action="append", default=[])
    parser.add_argument("--cudnn-library-path", action="append", default=[])
    parser.add_argument("--kernel-module", default=KERNEL_MODULE)
    parser.add_argument("--pci-devices", default=PCI_DEVICES)
    args = parser.parse_args(argv)
    facts = {
        "python": sys.executable,
        "nvml": nvml_facts(),
        "kernel_module": kernel_module_facts(args.kernel_module),
        "pci_functions": nvidia_pci_functions(args.pci_devices),
        "toolkits": toolkits(args.toolkit_path),
        "cudnn": {
            "headers": cudnn_headers(args.cudnn_include_path),
            "libraries": cudnn_libraries(args.cudnn_library_path),
        },
        "torch": torch_facts(),
    }
    json.dump(facts, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
