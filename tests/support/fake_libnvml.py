"""libnvidia-ml.so.1 built from tests/sandbox/fake_nvml.c: what the real pynvml loads where
there is no GPU (the cuda_check role's tests, hostcheck job's GPU sampling)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FAKE_NVML_SOURCE = Path(__file__).resolve().parents[2] / "tests" / "sandbox" / "fake_nvml.c"


def gcc_missing() -> str | None:
    return None if shutil.which("gcc") else "gcc is not installed (it builds the fake NVML)"


def build_fake_nvml(
    folder: Path,
    driver: str = "550.54.15",
    cuda: int = 12040,
    gpus: int = 8,
    init_error: int = 0,
) -> Path:
    """libnvidia-ml.so.1 in folder, answering with these versions (CUDA as NVML gives it:
    1000 * major + 10 * minor) and this many GPUs; init_error: the code nvmlInit returns."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "libnvidia-ml.so.1"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wall",
            "-Werror",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(target),
            str(FAKE_NVML_SOURCE),
            f'-DFAKE_NVML_DRIVER="{driver}"',
            f"-DFAKE_NVML_CUDA={cuda}",
            f"-DFAKE_NVML_GPUS={gpus}",
            f"-DFAKE_NVML_INIT_ERROR={init_error}",
        ],
        check=True,
        capture_output=True,
    )
    return target


def write_state(path: Path, gpus: dict[int, dict]) -> None:
    """The fake's $FAKE_NVML_STATE: GPU index -> {util, memory_used, pcie_tx, pcie_rx, pids},
    written whole and renamed over the old file (the library reads it at each call)."""
    lines = []
    for index, values in sorted(gpus.items()):
        words = [
            f"{key}={','.join(map(str, value)) if isinstance(value, (list, tuple)) else value}"
            for key, value in values.items()
        ]
        lines.append(" ".join([str(index), *words]))
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(path)
