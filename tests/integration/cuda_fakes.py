"""Stand-ins for the NVIDIA parts of a GPU host, for the cuda_check tests (there is no GPU here).

Each stands in for one thing the role reads, and only for what it reads:
- libnvidia-ml.so.1 of a driver: tests/sandbox/fake_nvml.c, built with gcc for one driver
  version and the CUDA version it supports (pynvml, the real one, loads it;
  tests.support.fake_libnvml builds it);
- a CUDA or CPU build of torch: a `torch` package with __version__, version.cuda and
  backends.cudnn.version(), nothing else;
- a CUDA toolkit: version.json (11.1 and later) or version.txt (older), no binaries;
- cuDNN: cudnn_version_v9.h with its version defines, and empty libcudnn.so.* files (the role
  reads their names, never their code).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# name -> (driver version, CUDA version as NVML gives it: 1000 * major + 10 * minor, init error)
DRIVERS = {
    "550": ("550.54.15", 12040, 0),  # CUDA 12.4
    "535": ("535.104.05", 12020, 0),  # CUDA 12.2
    "470": ("470.239.06", 11040, 0),  # CUDA 11.4
    "not-loaded": ("550.54.15", 12040, 9),  # the library is there, the kernel module is not
}
# name -> (torch.__version__, torch.version.cuda, torch.backends.cudnn.version())
TORCHES = {
    "cu124": ("2.5.1+cu124", "12.4", 90100),
    "cu121": ("2.5.1+cu121", "12.1", 90100),
    "cpu": ("2.5.1+cpu", None, None),
}
CUDNN_HEADER = "#define CUDNN_MAJOR {}\n#define CUDNN_MINOR {}\n#define CUDNN_PATCHLEVEL {}\n"


def torch_files(version: str, cuda: str | None, cudnn: int | None) -> dict[str, str]:
    """A `torch` package: relative path -> text."""
    return {
        "torch/__init__.py": f"__version__ = {version!r}\nfrom torch import backends, version\n",
        "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = None\n",
        "torch/backends/__init__.py": "",
        "torch/backends/cudnn/__init__.py": f"def version():\n    return {cudnn!r}\n",
    }


def write_tree(root: Path, files: dict[str, str], links: dict[str, str] | None = None) -> None:
    """Files (relative path -> text) and symbolic links (relative path -> target) under root."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for relative, target in (links or {}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        os.symlink(target, path)


def gpu_host_tree(root: Path, triplet: str = "x86_64-linux-gnu") -> None:
    """A GPU host's CUDA toolkits and cuDNN where the role looks by default (Debian layout):
    CUDA 12.4.1 (version.json) and 11.8.89 (version.txt) in /usr/local, /usr/local/cuda -> 12.4,
    cuDNN 9.1.0 as NVIDIA's Debian packages install it (header through alternatives)."""
    write_tree(
        root,
        {
            "usr/local/cuda-12.4/version.json": json.dumps(
                {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}
            ),
            "usr/local/cuda-11.8/version.txt": "CUDA Version 11.8.89\n",
            f"usr/include/{triplet}/cudnn_version_v9.h": CUDNN_HEADER.format(9, 1, 0),
            f"usr/lib/{triplet}/libcudnn.so.9.1.0": "",
            f"usr/lib/{triplet}/libcudnn_ops.so.9.1.0": "",
        },
        {
            "usr/local/cuda": "cuda-12.4",
            "usr/include/cudnn_version.h": f"{triplet}/cudnn_version_v9.h",
            f"usr/lib/{triplet}/libcudnn.so.9": "libcudnn.so.9.1.0",
            f"usr/lib/{triplet}/libcudnn_ops.so.9": "libcudnn_ops.so.9.1.0",
        },
    )


def cuda_torch_venv(venv: str) -> dict[str, str]:
    """A venv holding a CUDA 12.1 build of torch as the gpu check reads it (its files, never
    imported): absolute path -> text."""
    files = {
        **torch_files("2.5.1+cu121", "12.1", 90100),
        "torch-2.5.1+cu121.dist-info/METADATA": "Name: torch\nVersion: 2.5.1+cu121\n",
    }
    return {f"{venv}/lib/python3.11/site-packages/{path}": text for path, text in files.items()}


def pci_gpus_shell(count: int) -> str:
    """Shell that puts `count` NVIDIA GPU functions (0000:18:00.0 on) over the host's
    /sys/bus/pci/devices, in its own mount namespace, as tests/sandbox/fake_nvml.c numbers
    them (what tests/integration/playbooks/fake_gpu.yml does for the nvidia_driver role)."""
    made = []
    for index in range(count):
        folder = f"/run/fake-sys/pci/0000:{0x18 + index:02x}:00.0"
        made.append(
            f"mkdir -p {folder} && echo 0x10de > {folder}/vendor && "
            f"echo 0x2330 > {folder}/device && echo 0x030200 > {folder}/class"
        )
    return (
        "rm -rf /run/fake-sys && " + " && ".join(made)
        + " && mount --bind /run/fake-sys/pci /sys/bus/pci/devices"
    )  # fmt: skip


def files_tar(files: dict[str, str]) -> bytes:
    """An uncompressed tar of these files (absolute path -> text), for `tar -x -C /`."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(path.lstrip("/"))
            member.size, member.mode = len(data), 0o644
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()
