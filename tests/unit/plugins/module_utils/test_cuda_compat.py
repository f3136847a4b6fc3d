"""One torch-versus-driver rule (plugins/module_utils/cuda_compat.py): hostcheck's gpu check and
the cuda_check role's filter give the same verdict on every case, the one where they used to
disagree included (a cu11x torch on driver 450.51: the gpu check warned, the role failed). And
what CUDA's and cuDNN's version numbers say, for both."""

from __future__ import annotations

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import (
    _torch_vs_driver,
)
from hostcheck._shared.cuda_compat import (
    MINOR,
    RUNS,
    TOO_OLD,
    cuda_from_int,
    cudnn_from_int,
    format_version,
    torch_on_driver,
)

from hostcheck.checks.gpu import _torch_finding
from hostcheck.gpu.torch_probe import TorchInfo
from hostcheck.model import Status

# torch CUDA, driver CUDA, driver version -> verdict
CASES = [
    ("12.4", "12.4", "550.54.15", RUNS),
    ("12.1", "12.4", "550.54.15", RUNS),
    ("11.8", "12.2", "535.104.05", RUNS),
    # minor version compatibility: same major, driver at least the major's minimum
    ("12.4", "12.0", "525.60.13", MINOR),
    ("11.8", "11.0", "450.80.02", MINOR),
    # same major, driver below that minimum: the case the two used to disagree on
    ("11.8", "11.0", "450.51.06", TOO_OLD),
    ("12.4", "12.0", "525.53", TOO_OLD),
    # an older major
    ("12.1", "11.8", "520.61.05", TOO_OLD),
    ("13.0", "12.9", "575.57.08", TOO_OLD),
]
STATUS = {RUNS: Status.PASS, MINOR: Status.WARN, TOO_OLD: Status.FAIL}


@pytest.mark.parametrize(("torch_cuda", "driver_cuda", "driver", "verdict"), CASES)
def test_the_rule(torch_cuda, driver_cuda, driver, verdict):
    assert torch_on_driver(torch_cuda, driver_cuda, driver)[0] == verdict


@pytest.mark.parametrize(("torch_cuda", "driver_cuda", "driver", "verdict"), CASES)
def test_gpu_check_and_cuda_check_agree(torch_cuda, driver_cuda, driver, verdict):
    major, minor = (int(part) for part in driver_cuda.split("."))
    finding = _torch_finding(
        TorchInfo(where="/opt/venvs/train", version="2.5.1", cuda=torch_cuda),
        (major, minor),
        driver,
    )
    problem, warning = _torch_vs_driver(
        {"version": "2.5.1", "cuda": torch_cuda}, driver, driver_cuda, "/opt/venvs/train"
    )
    assert finding.status == STATUS[verdict], finding.display
    role = Status.FAIL if problem else Status.WARN if warning else Status.PASS
    assert role == finding.status, (problem, warning, finding.display)


def test_cuda_version_numbers():
    """NVML's, the driver API's and CUDART_VERSION's 1000 * major + 10 * minor."""
    assert [format_version(cuda_from_int(n)) for n in (12040, 11080, 13000, 12090)] == [
        "12.4",
        "11.8",
        "13.0",
        "12.9",
    ]


@pytest.mark.parametrize(
    ("number", "text"),
    [
        # cuDNN 9 and later: 10000 * major + 100 * minor + patch
        (90100, "9.1.0"),
        (90501, "9.5.1"),
        (90000, "9.0.0"),
        (100200, "10.2.0"),
        # cuDNN 8 and older: 1000 * major + 100 * minor + patch
        (8902, "8.9.2"),
        (8907, "8.9.7"),
        (8000, "8.0.0"),
        (7605, "7.6.5"),
    ],
)
def test_cudnn_version_numbers(number, text):
    assert format_version(cudnn_from_int(number)) == text
