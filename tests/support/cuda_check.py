"""The cuda_check role's facts script and the facts and settings its tests start from."""

from __future__ import annotations

import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import (
    SETTINGS,
)

from tests.paths import CHECKOUT as REPO

ROLE = REPO / "roles" / "cuda_check"


SCRIPT = ROLE / "files" / "cuda_facts.py"


VENV = "/opt/venvs/train"


NO_LIBRARY = "NVML Shared Library Not Found"


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def settings(**changes) -> dict:
    """The role's defaults as the role hands them to the filter, with changes."""
    values = {name: defaults()[name] for name in SETTINGS}
    values["cuda_check_venv"] = VENV
    values.update({f"cuda_check_{key}": value for key, value in changes.items()})
    return values


def facts(
    driver: str | None = "550.54.15",
    cuda: str | None = "12.4",
    torch: str | None = "2.5.1+cu124",
    torch_cuda: str | None = "12.4",
    torch_cudnn: str | None = "9.1.0",
    torch_error: str | None = None,
    error: str = NO_LIBRARY,
    **more,
) -> dict:
    """What cuda_facts.py's reading means (cuda_check_facts): a host with this driver (None:
    none) and this torch."""
    found = {
        "python": f"{VENV}/bin/python",
        "nvml": {
            "loaded": driver is not None,
            "driver_version": driver,
            "cuda_driver_version": cuda if driver else None,
            "gpu_count": 8 if driver else None,
            "error": None if driver else error,
            "problems": [],
        },
        "kernel_module": {"loaded": driver is not None, "version": driver},
        "pci_gpus": 8 if driver else 0,
        "toolkits": [
            {
                "path": "/usr/local/cuda-12.4",
                "real_path": "/usr/local/cuda-12.4",
                "version": "12.4.1",
                "source": "version.json",
            },
        ],
        "cudnn": {
            "headers": [{"path": "/usr/include/cudnn_version.h", "version": "9.1.0"}],
            "libraries": [
                {
                    "path": "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0",
                    "version": "9.1.0",
                    "names": ["/usr/lib/x86_64-linux-gnu/libcudnn.so.9"],
                },
            ],
        },
        "torch": {
            "version": torch,
            "cuda": torch_cuda,
            "hip": None,
            "cudnn": torch_cudnn,
            "error": torch_error,
            "cudnn_error": None,
        },
    }
    found.update(more)
    return found
