"""The cuda_check role off the sandbox: its decision (plugins/plugin_utils/cuda_check_rules.py)
over tables of driver, CUDA, toolkit, cuDNN and torch versions; its facts script run for real by
this checkout's python against fixture trees, the real pynvml and torch, and a fake libnvidia-ml
(tests/sandbox/fake_nvml.c); and defaults that match meta/argument_specs.yml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import (
    SETTINGS,
    cuda_check_decide,
    cuda_check_facts,
    matches,
)
from hostcheck._shared.cuda_compat import MINOR_COMPATIBLE_DRIVER, at_least
from hostcheck._shared.cuda_compat import parse_version as parse

from tests.integration.cuda_fakes import (
    CUDNN_HEADER,
    DRIVERS,
    TORCHES,
    gpu_host_tree,
    torch_files,
    write_tree,
)
from tests.support.cuda_check import (
    NO_LIBRARY,
    ROLE,
    SCRIPT,
    VENV,
    facts,
    settings,
)
from tests.support.fake_libnvml import build_fake_nvml, gcc_missing

# ---------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("have", "want", "result"),
    [
        ("535.104.05", "535.54.03", True),  # as strings, "104" < "54"
        ("535.54.03", "535.104.05", False),
        ("12.10", "12.9", True),
        ("12", "12.0.0", True),
        ("12.4", "12.4.1", False),
        ("550", "535.104.05", True),
    ],
)
def test_versions_compare_number_by_number(have, want, result):
    assert at_least(parse(have), parse(want)) is result


@pytest.mark.parametrize(
    ("have", "want", "result"),
    [
        ("12.4.1", "12.4", True),
        ("12.4.1", "12", True),
        ("12", "12.4", False),
        ("12.40", "12.4", False),
        (None, "12", False),
        ("9.1.0", "9.1.0", True),
    ],
)
def test_a_version_matches_what_it_starts_with(have, want, result):
    assert matches(have, want) is result


def test_parse_takes_dotted_digits_only():
    assert parse("550.54.15") == (550, 54, 15)
    assert [parse(v) for v in ("", "twelve", "12.", "12.4-1", None, "١٢")] == [None] * 6


def test_minor_version_compatibility_minimums():
    """NVIDIA's table (CUDA release notes, docs.nvidia.com/deploy/cuda-compatibility)."""
    assert MINOR_COMPATIBLE_DRIVER == {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


# ---------------------------------------------------------------- what the readings mean


def reading() -> dict:
    """What cuda_facts.py prints on the host whose facts() are the defaults."""
    found = facts()
    del found["pci_gpus"]
    found["nvml"]["cuda_driver_version"] = 12040
    found["pci_functions"] = [
        {"address": f"0000:{bus:02x}:00.0", "vendor": "0x10de", "class": "0x030200"}
        for bus in range(8)
    ] + [{"address": "0000:07:00.1", "vendor": "0x10de", "class": "0x040300"}]  # HDMI audio
    found["toolkits"][0]["cudart_version"] = None
    found["torch"]["cudnn"] = 90100
    return found


def test_the_readings_mean_the_facts():
    assert cuda_check_facts(reading()) == facts()


def test_numbers_become_versions_by_cuda_compat():
    raw = reading()
    raw["nvml"]["cuda_driver_version"] = 11080
    raw["toolkits"].append(
        {
            "path": "/usr/local/cuda-13.0",
            "real_path": "/usr/local/cuda-13.0",
            "version": None,
            "cudart_version": 13000,
            "source": "include/cuda_runtime_api.h",
        }
    )
    raw["torch"]["cudnn"] = 8902
    found = cuda_check_facts(raw)
    assert found["nvml"]["cuda_driver_version"] == "11.8"
    assert [t["version"] for t in found["toolkits"]] == ["12.4.1", "13.0"]
    assert all("cudart_version" not in t for t in found["toolkits"])
    assert found["torch"]["cudnn"] == "8.9.2"


def test_numbers_missing_stay_missing():
    raw = reading()
    raw["nvml"]["cuda_driver_version"] = None
    raw["toolkits"][0].update(version=None, source=None)
    raw["torch"]["cudnn"] = None
    found = cuda_check_facts(raw)
    assert found["nvml"]["cuda_driver_version"] is None
    assert found["toolkits"][0]["version"] is None
    assert found["torch"]["cudnn"] is None
    raw["torch"]["cudnn"] = 0  # torch without cuDNN
    assert cuda_check_facts(raw)["torch"]["cudnn"] is None


# ---------------------------------------------------------------- the decision


CPU = {"torch": "2.5.1+cpu", "torch_cuda": None, "torch_cudnn": None}
NO_TORCH = {**CPU, "torch": None, "torch_error": "import torch failed in /usr/bin/python3: X"}
CU121 = {"torch": "2.5.1+cu121", "torch_cuda": "12.1"}
MODULE_ONLY = {"loaded": True, "version": "550.54.15"}
# fmt: off
DECISIONS = [
    # (id, facts, settings, status, [in a problem, one each], [in a warning, one each])
    ("driver CUDA 12.4 runs cu121", facts(**CU121), settings(), "pass", [], []),
    ("same CUDA", facts(), settings(), "pass", [], []),
    ("535 / CUDA 12.2 runs cu124 by minor version compatibility",
     facts(driver="535.104.05", cuda="12.2"), settings(), "pass", [],
     ["driver 535.104.05 supports CUDA 12.2, torch is built for CUDA 12.4: runs through CUDA "
      "minor version compatibility (driver >= 525.60.13); PTX JIT of code newer than CUDA "
      "12.2 is not available"]),
    ("470 / CUDA 11.4 cannot run cu121",
     facts(driver="470.239.06", cuda="11.4", **CU121), settings(), "fail",
     [f"cuda_check_venv: torch 2.5.1+cu121 in {VENV} is built for CUDA 12.1; driver "
      "470.239.06 supports CUDA 11.4 only (needs driver CUDA >= 12.1, or a 12.x driver >= "
      "525.60.13 (minor version compatibility))"], []),
    ("CUDA 11.0 driver below 450.80.02 cannot run cu118",
     facts(driver="450.51.06", cuda="11.0", torch="2.1.0+cu118", torch_cuda="11.8"),
     settings(), "fail", ["driver 450.51.06 supports CUDA 11.0 only"], []),
    ("a CUDA 12.8 driver cannot run a cu130 build (another major)",
     facts(driver="570.124.06", cuda="12.8", torch="2.9.0+cu130", torch_cuda="13.0"),
     settings(), "fail", ["or a 13.x driver >= 580.65.06"], []),
    ("CPU torch on a driver host fails", facts(**CPU), settings(), "fail",
     [f"cuda_check_require_torch_cuda: torch 2.5.1+cpu in {VENV} is a CPU-only build, on a "
      "host with a driver"], []),
    ("CPU torch allowed", facts(**CPU), settings(require_torch_cuda=False), "pass", [],
     [f"torch 2.5.1+cpu in {VENV} is a CPU-only build (allowed: "
      "cuda_check_require_torch_cuda is false)"]),
    ("torch missing on a driver host fails", facts(**NO_TORCH), settings(), "fail",
     [f"cuda_check_require_torch_cuda: torch cannot be imported from {VENV} (import torch "
      "failed in /usr/bin/python3: X)"], []),
    ("no driver, skip", facts(driver=None), settings(), "skip", [], []),
    ("no driver, fail", facts(driver=None), settings(without_driver="fail"), "fail",
     [f"cuda_check_without_driver: fail: no NVIDIA driver (NVML: {NO_LIBRARY})"], []),
    ("no driver: requests are not checked", facts(driver=None),
     settings(toolkit_version="13.0", cudnn_version="8", min_driver_version="999"),
     "skip", [], []),
    ("a kernel module without NVML fails, even with skip",
     facts(driver=None, error="Driver/library version mismatch", kernel_module=MODULE_ONLY),
     settings(), "fail",
     ["the NVIDIA kernel module 550.54.15 is loaded, but NVML does not answer "
      "(Driver/library version mismatch)"], []),
    ("NVML answers without the CUDA version",
     facts(nvml={"loaded": True, "driver_version": "550.54.15", "cuda_driver_version": None,
                 "gpu_count": 8, "error": None,
                 "problems": ["nvmlSystemGetCudaDriverVersion_v2: Unknown Error"]}),
     settings(), "fail",
     ["NVML: nvmlSystemGetCudaDriverVersion_v2: Unknown Error",
      f"cuda_check_venv: torch 2.5.1+cu124 in {VENV} is built for CUDA 12.4; the driver's "
      "CUDA version is unknown"], []),
    ("minimums met, compared number by number",
     facts(driver="535.104.05", cuda="12.2", **CU121),
     settings(min_driver_version="535.54.03", min_cuda_version="12.2"), "pass", [], []),
    ("minimums missed", facts(driver="535.104.05", cuda="12.2", **CU121),
     settings(min_driver_version="535.129.03", min_cuda_version="12.4"), "fail",
     ["cuda_check_min_driver_version: driver 535.104.05 is older than 535.129.03",
      "cuda_check_min_cuda_version: driver 535.104.05 supports CUDA 12.2, not 12.4"], []),
    ("requested versions present", facts(),
     settings(toolkit_version="12.4", cudnn_version="9.1", torch_cuda_version="12"),
     "pass", [], []),
    ("requested versions missing", facts(),
     settings(toolkit_version="12.6", cudnn_version="8", torch_cuda_version="12.1"), "fail",
     ["cuda_check_toolkit_version: no CUDA 12.6 toolkit under cuda_check_toolkit_paths "
      "(found: 12.4.1 (/usr/local/cuda-12.4))",
      "cuda_check_cudnn_version: no cuDNN 8 library (libcudnn.so.*) in "
      "cuda_check_cudnn_library_paths (found: 9.1.0 "
      "(/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0))",
      "cuda_check_cudnn_version: cuDNN header(s) of another version than 8: 9.1.0 "
      "(/usr/include/cudnn_version.h)",
      f"cuda_check_torch_cuda_version: torch 2.5.1+cu124 in {VENV} is built for CUDA 12.4, "
      "not 12.1"], []),
    ("torch's own cuDNN of another major is informational",
     facts(cudnn={"headers": [], "libraries": [{"path": "/usr/lib64/libcudnn.so.8.9.7",
                                                 "version": "8.9.7", "names": []}]}),
     settings(), "pass", [],
     ["torch uses cuDNN 9.1.0 (its own, from the venv); the host's cuDNN major is 8"]),
]
# fmt: on


@pytest.mark.parametrize(
    ("found", "given", "status", "problems", "warnings"),
    [row[1:] for row in DECISIONS],
    ids=[row[0] for row in DECISIONS],
)
def test_decision(found, given, status, problems, warnings):
    result = cuda_check_decide(found, given)
    assert result["status"] == status, result["message"]
    for wanted in problems:
        assert any(wanted in line for line in result["problems"]), (wanted, result["problems"])
    assert len(result["problems"]) == len(problems), result["problems"]
    for wanted in warnings:
        assert any(wanted in line for line in result["warnings"]), (wanted, result["warnings"])
    assert len(result["warnings"]) == len(warnings), result["warnings"]


def test_no_driver_says_so_in_both_modes():
    for mode, status in (("skip", "skip"), ("fail", "fail")):
        result = cuda_check_decide(facts(driver=None), settings(without_driver=mode))
        assert result["status"] == status
        assert result["reason"] == f"no NVIDIA driver (NVML: {NO_LIBRARY})"
        assert result["message"].startswith(f"cuda_check: {status}: no NVIDIA driver")
    with_gpus = cuda_check_decide(facts(driver=None, pci_gpus=2), settings())
    assert with_gpus["reason"].endswith("; 2 NVIDIA GPU(s) on the PCI bus")


def test_a_failure_shows_every_version_side_by_side():
    found = facts(driver="470.239.06", cuda="11.4")
    result = cuda_check_decide(found, settings(toolkit_version="12.6"))
    assert result["status"] == "fail"
    assert result["table"] == [
        "NVIDIA driver       470.239.06 (NVML; 8 GPU(s))",
        "driver CUDA         11.4",
        "NVIDIA GPUs on PCI  8",
        "CUDA toolkits       12.4.1 /usr/local/cuda-12.4",
        "cuDNN header        9.1.0 /usr/include/cudnn_version.h",
        "cuDNN library       9.1.0 /usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0",
        f"torch               2.5.1+cu124 in {VENV}",
        "torch CUDA          12.4",
        "torch cuDNN         9.1.0",
    ]
    lines = result["message"].splitlines()
    assert lines[0] == "cuda_check: fail: 2 problem(s)"
    assert lines[1:10] == result["table"]
    assert [line.split(":")[1].strip() for line in lines[10:]] == [
        "cuda_check_toolkit_version",
        "cuda_check_venv",
    ]


def test_bad_arguments():
    with pytest.raises(ValueError, match="settings lack cuda_check_venv"):
        cuda_check_decide(facts(), {})
    with pytest.raises(TypeError, match="as mappings"):
        cuda_check_decide("{}", settings())


# ---------------------------------------------------------------- the facts script, for real


def run_facts(*args: str, env: dict | None = None, site: bool = False) -> dict:
    """The script's JSON as the action takes it (cuda_check_facts). Without site-packages (-S:
    no pynvml, no torch) unless site is true: the tests of the files it reads do not wait for
    torch's import."""
    done = subprocess.run(
        [sys.executable, *([] if site else ["-S"]), str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return cuda_check_facts(json.loads(done.stdout))


def tree_args(root: Path) -> list[str]:
    return [
        f"--toolkit-path={root}/usr/local",
        f"--cudnn-include-path={root}/usr/include",
        f"--cudnn-include-path={root}/usr/include/x86_64-linux-gnu",
        f"--cudnn-library-path={root}/usr/lib/x86_64-linux-gnu",
        f"--kernel-module={root}/proc/driver/nvidia/version",
        f"--pci-devices={root}/sys/bus/pci/devices",
    ]


def test_toolkits_and_cudnn_of_a_fixture_tree(tmp_path):
    gpu_host_tree(tmp_path)
    write_tree(
        tmp_path,
        {
            # CUDA from the nvidia-cuda-* wheels: no version file, the runtime header has it
            "usr/local/cuda-13.0/include/cuda_runtime_api.h": "#define CUDART_VERSION  13000\n",
            "usr/local/cuda-broken/bin/nvcc": "",  # no version anywhere
            # an old cuDNN keeps its version in cudnn.h; a dangling library link is skipped
            "opt/old/include/cudnn.h": CUDNN_HEADER.format(7, 6, 5),
        },
        {"usr/lib/x86_64-linux-gnu/libcudnn.so.8": "libcudnn.so.8.9.7"},
    )
    found = run_facts(*tree_args(tmp_path), f"--cudnn-include-path={tmp_path}/opt/old/include")
    local = f"{tmp_path}/usr/local"
    assert found["toolkits"] == [
        {
            "path": f"{local}/cuda-11.8",
            "real_path": f"{local}/cuda-11.8",
            "version": "11.8.89",
            "source": "version.txt",
        },
        {
            "path": f"{local}/cuda-12.4",
            "real_path": f"{local}/cuda-12.4",
            "version": "12.4.1",
            "source": "version.json",
        },
        {
            "path": f"{local}/cuda-13.0",
            "real_path": f"{local}/cuda-13.0",
            "version": "13.0",
            "source": "include/cuda_runtime_api.h",
        },
        {
            "path": f"{local}/cuda-broken",
            "real_path": f"{local}/cuda-broken",
            "version": None,
            "source": None,
        },
        {
            "path": f"{local}/cuda",
            "real_path": f"{local}/cuda-12.4",
            "version": "12.4.1",
            "source": "version.json",
        },
    ]
    lib = f"{tmp_path}/usr/lib/x86_64-linux-gnu"
    assert found["cudnn"] == {
        # the alternatives link and the file it points to are one header
        "headers": [
            {"path": f"{tmp_path}/usr/include/cudnn_version.h", "version": "9.1.0"},
            {"path": f"{tmp_path}/opt/old/include/cudnn.h", "version": "7.6.5"},
        ],
        "libraries": [
            {
                "path": f"{lib}/libcudnn.so.9.1.0",
                "version": "9.1.0",
                "names": [f"{lib}/libcudnn.so.9", f"{lib}/libcudnn.so.9.1.0"],
            },
        ],
    }
    assert found["kernel_module"] == {"loaded": False, "version": None}
    assert found["pci_gpus"] == 0


def test_a_toolkit_folder_given_itself(tmp_path):
    write_tree(tmp_path, {"usr/lib/cuda/version.txt": "CUDA Version 10.2.89\n"})
    found = run_facts(f"--toolkit-path={tmp_path}/usr/lib/cuda", "--toolkit-path=/nonexistent")
    assert [(t["path"], t["version"]) for t in found["toolkits"]] == [
        (f"{tmp_path}/usr/lib/cuda", "10.2.89")
    ]


@pytest.mark.parametrize(
    ("line", "version"),
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  "
            "Tue Mar  5 22:23:56 UTC 2024",
            "550.54.15",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Wed Feb 26 01:44:12 UTC 2025",
            "570.124.06",
        ),
        ("NVRM version: something else", None),
    ],
)
def test_kernel_module_and_pci_gpus(tmp_path, line, version):
    devices = tmp_path / "sys/bus/pci/devices"
    for name, vendor, klass in [
        ("0000:3b:00.0", "0x10de", "0x030200"),  # an NVIDIA 3D controller (a data-centre GPU)
        ("0000:5e:00.0", "0x10de", "0x030000"),  # an NVIDIA VGA controller
        ("0000:5e:00.1", "0x10de", "0x040300"),  # its HDMI audio function: not a GPU
        ("0000:00:02.0", "0x8086", "0x030000"),  # an Intel GPU
    ]:
        write_tree(devices / name, {"vendor": f"{vendor}\n", "class": f"{klass}\n"})
    write_tree(tmp_path, {"proc/driver/nvidia/version": f"{line}\nGCC version:  gcc 12\n"})
    found = run_facts(*tree_args(tmp_path))
    assert found["kernel_module"] == {"loaded": True, "version": version}
    assert found["pci_gpus"] == 2


def test_any_nvidia_display_function_is_a_gpu_and_an_nvswitch_is_not(tmp_path):
    """The script reports each NVIDIA function's class as sysfs gives it; what is a GPU is
    module_utils/pci.py's rule, as for hostcheck and the nvidia_driver probe: a display
    controller of the "other" subclass (0x0380) counts, an NVSwitch bridge does not."""
    devices = tmp_path / "sys/bus/pci/devices"
    for name, vendor, klass in [
        ("0000:3b:00.0", "0x10de", "0x030200"),  # an NVIDIA 3D controller
        ("0000:86:00.0", "0x10DE", "0x038000"),  # an NVIDIA display controller, "other"
        ("0000:c1:00.0", "0x10de", "0x068000"),  # an NVSwitch
        ("0000:00:02.0", "0x8086", "0x038000"),  # another vendor's
    ]:
        write_tree(devices / name, {"vendor": f"{vendor}\n", "class": f"{klass}\n"})
    done = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), f"--pci-devices={devices}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    reading = json.loads(done.stdout)
    assert reading["pci_functions"] == [
        {"address": "0000:3b:00.0", "vendor": "0x10de", "class": "0x030200"},
        {"address": "0000:86:00.0", "vendor": "0x10DE", "class": "0x038000"},
        {"address": "0000:c1:00.0", "vendor": "0x10de", "class": "0x068000"},
    ]
    found = cuda_check_facts(reading)
    assert "pci_functions" not in found
    assert found["pci_gpus"] == 2
    assert cuda_check_decide(found, settings())["table"][2] == "NVIDIA GPUs on PCI  2"


def test_real_pynvml_without_a_driver_and_the_real_cpu_torch():
    """This machine has no NVIDIA driver: the real pynvml says so; the real torch of this
    checkout's venv is a CPU build (no CUDA, no cuDNN), and nothing initialises CUDA."""
    import torch

    found = run_facts("--toolkit-path=/nonexistent", env={"LD_LIBRARY_PATH": ""}, site=True)
    assert found["python"] == sys.executable
    assert found["nvml"] == {
        "loaded": False,
        "driver_version": None,
        "cuda_driver_version": None,
        "gpu_count": None,
        "error": NO_LIBRARY,
        "problems": [],
    }
    assert torch.version.cuda is None  # the checkout's venv holds the CPU build
    assert found["torch"] == {
        "version": torch.__version__,
        "cuda": None,
        "hip": None,
        "cudnn": None,
        "error": None,
        "cudnn_error": None,
    }


def test_without_pynvml_and_torch():
    """The OS python (no site-packages here, -S) runs it when the venv has no python."""
    found = run_facts("--toolkit-path=/nonexistent")
    assert found["nvml"]["loaded"] is False
    assert found["nvml"]["error"].startswith(
        f"pynvml (nvidia-ml-py) cannot be imported by {sys.executable}: No module named 'pynvml'"
    )
    assert found["torch"]["error"].startswith(f"import torch failed in {sys.executable}: ")
    result = cuda_check_decide(found, settings())
    assert result["status"] == "skip"
    assert result["reason"].startswith("no NVIDIA driver (NVML: pynvml (nvidia-ml-py) cannot be")


@pytest.mark.skipif(gcc_missing() is not None, reason=str(gcc_missing()))
@pytest.mark.parametrize(
    ("driver", "torch", "status", "said"),
    [
        ("550", "cu124", "pass", "driver 550.54.15 (CUDA 12.4) can run torch 2.5.1+cu124"),
        ("535", "cu124", "pass", "driver 535.104.05 (CUDA 12.2) can run torch 2.5.1+cu124"),
        ("470", "cu124", "fail", "1 problem(s)"),
        ("not-loaded", "cu124", "skip", "no NVIDIA driver (NVML: Driver Not Loaded)"),
        ("550", "cpu", "fail", "1 problem(s)"),
    ],
)
def test_fake_driver_and_torch_end_to_end(tmp_path, driver, torch, status, said):
    """The real pynvml loads the fake libnvidia-ml.so.1; a fake torch package shadows the real
    one; the script's JSON goes through the decision as the role passes it."""
    version, cuda, init_error = DRIVERS[driver]
    build_fake_nvml(tmp_path / "lib", version, cuda, gpus=2, init_error=init_error)
    write_tree(tmp_path / "site", torch_files(*TORCHES[torch]))
    gpu_host_tree(tmp_path / "root")
    found = run_facts(
        *tree_args(tmp_path / "root"),
        env={"LD_LIBRARY_PATH": str(tmp_path / "lib"), "PYTHONPATH": str(tmp_path / "site")},
        site=True,
    )
    if init_error:
        assert found["nvml"]["loaded"] is False
    else:
        assert found["nvml"] == {
            "loaded": True,
            "driver_version": version,
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "gpu_count": 2,
            "error": None,
            "problems": [],
        }
    torch_version, torch_cuda, torch_cudnn = TORCHES[torch]
    assert found["torch"]["version"] == torch_version
    assert found["torch"]["cuda"] == torch_cuda
    assert found["torch"]["cudnn"] == ("9.1.0" if torch_cudnn else None)
    result = cuda_check_decide(found, settings(toolkit_version="12.4", cudnn_version="9.1"))
    assert result["status"] == status, result["message"]
    assert result["reason"] == said


def test_the_real_toolkit_of_this_machine():
    """Where this machine has a CUDA toolkit in /usr/local, the script reads the same version
    as its cuda_runtime_api.h says, through the link /usr/local/cuda too."""
    header = Path("/usr/local/cuda/include/cuda_runtime_api.h")
    if not header.exists():
        pytest.skip("no CUDA toolkit in /usr/local/cuda here")
    number = int(
        next(
            line.split()[2]
            for line in header.read_text().splitlines()
            if line.startswith("#define CUDART_VERSION")
        )
    )
    found = run_facts("--toolkit-path=/usr/local")
    link = next(t for t in found["toolkits"] if t["path"] == "/usr/local/cuda")
    assert link["real_path"] == os.path.realpath("/usr/local/cuda")
    assert matches(link["version"], f"{number // 1000}.{number % 1000 // 10}")


# ---------------------------------------------------------------- the role's files


def test_defaults_match_the_argument_specs_and_are_commented():
    text = (ROLE / "defaults" / "main.yml").read_text()
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert {k: v["default"] for k, v in specs["main"]["options"].items()} == yaml.safe_load(text)
    lines = text.splitlines()
    assert all(
        lines[n - 1].startswith("# ") for n, ln in enumerate(lines) if ln[:11] == "cuda_check_"
    )
    assert set(SETTINGS) <= set(specs["main"]["options"])
    assert specs["main"]["options"]["cuda_check_without_driver"]["choices"] == ["fail", "skip"]


def test_the_role_only_reads():
    """A check role: provision.yml (main.yml imports it) and verify.yml are each one task of its
    own read-only action (plugins/action/cuda_check_verify.py, which validates first),
    validate.yml this OS's vars file loaded, then the validation."""
    tasks = {
        path.name: yaml.safe_load(path.read_text())
        for path in sorted((ROLE / "tasks").glob("*.yml"))
    }
    assert sorted(tasks) == ["main.yml", "provision.yml", "validate.yml", "verify.yml"]
    modules = {
        name: [key for task in found for key in task if key.startswith(("ansible.", "hostcheck."))]
        for name, found in tasks.items()
    }
    assert modules == {
        "main.yml": [
            "ansible.builtin.setup",  # the distribution facts, when the play did not gather them
            "ansible.builtin.import_tasks",
            "ansible.builtin.import_tasks",
        ],
        "provision.yml": ["hostcheck.gpu_hosts.cuda_check_verify"],
        "validate.yml": ["ansible.builtin.include_vars", "hostcheck.gpu_hosts.cuda_check_validate"],
        "verify.yml": ["hostcheck.gpu_hosts.cuda_check_verify"],
    }
    imported = [task["ansible.builtin.import_tasks"] for task in tasks["main.yml"][1:]]
    assert imported == ["validate.yml", "provision.yml"]
    assert tasks["provision.yml"][0]["register"] == "__cuda_check_checked"


def test_every_os_family_of_the_platforms_has_its_vars():
    meta = yaml.safe_load((ROLE / "meta" / "main.yml").read_text())
    families = {"Debian": "Debian", "Ubuntu": "Debian", "EL": "RedHat"}
    for platform in meta["galaxy_info"]["platforms"]:
        found = yaml.safe_load((ROLE / "vars" / f"{families[platform['name']]}.yml").read_text())
        assert set(found) == {
            "__cuda_check_os_cudnn_include_paths",
            "__cuda_check_os_cudnn_library_paths",
        }
