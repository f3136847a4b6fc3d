import json
import keyword
import resource
import subprocess
import sys

import pynvml
import pytest
from hostcheck._shared import cuda_compat
from hypothesis import given
from hypothesis import strategies as st

from hostcheck.checks import gpu
from hostcheck.checks.base import CheckContext
from hostcheck.gpu import nvml, torch_probe
from hostcheck.model import Status
from hostcheck.system import System
from tests.support.fake_nvml import FakeGpu, FakeNVMLError, fake_nvml

VENV = "/opt/train"
SITE = f"{VENV}/lib/python3.11/site-packages"
UNCORRECTED, CORRECTED = (
    pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
)
VOLATILE, AGGREGATE = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC

CONFIG = {
    "min_driver_version": "535.104.05",
    "require_persistence": True,
    "require_ecc": False,
    "max_uncorrected_ecc_volatile": 0,
    "max_uncorrected_ecc_aggregate": 0,
    "clock_events_fail": ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"],
    "clock_events_warn": ["sw_thermal_slowdown"],
    "training_venv": VENV,
    "max_retired_pages": 60,
    "nvlink_grace_seconds": 300,
    "kernel_log": "/dev/kmsg",
    "events_state": "/var/lib/hostcheck/gpu-events.json",
}


def config(**changes):
    return {**CONFIG, **changes}


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


def eight():
    return [FakeGpu(i) for i in range(8)]


# ---------------------------------------------------------------- fixture host


def add_torch(host, version="2.4.0+cu121", cuda="'12.1'", cudnn="9.1.0.70"):
    host.file(
        f"{SITE}/torch-{version}.dist-info/METADATA",
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
    )
    host.file(
        f"{SITE}/torch/version.py",
        "from typing import Optional\n\n"
        f"__version__ = '{version}'\ndebug = False\n"
        f"cuda: Optional[str] = {cuda}\ngit_version = 'abc'\nhip: Optional[str] = None\n",
    )
    if cudnn:
        host.file(
            f"{SITE}/nvidia_cudnn_cu12-{cudnn}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: {cudnn}\n",
        )


def add_pci_gpus(host, count):
    for i in range(count):
        base = f"/sys/bus/pci/devices/0000:{0x18 + i:02x}:00.0"
        host.file(f"{base}/vendor", "0x10de\n")
        host.file(f"{base}/class", "0x030200\n")
        host.file(f"{base}/device", "0x2330\n")
        host.file(f"{base}/numa_node", f"{i // 4}\n")
        host.file(f"{base}/uevent", "DRIVER=nvidia\n")


@pytest.fixture
def node(fake_host):
    add_torch(fake_host)
    add_pci_gpus(fake_host, 8)
    return fake_host


# ---------------------------------------------------------------- scenarios


def test_eight_healthy_gpus_pass_with_values(node):
    nv = fake_nvml(eight())
    result = gpu.run_with(node.context(config()), nv)
    assert result.status == Status.PASS, result.summary
    assert result.summary == (
        "8 x NVIDIA H100 80GB HBM3; driver 550.54.15 (CUDA 12.4); torch 2.4.0+cu121 CUDA 12.1"
    )
    assert result.data["driver_version"] == "550.54.15"
    assert result.data["cuda_driver_version"] == "12.4"
    assert result.data["nvml_gpu_count"] == 8
    first = result.data["gpus"][0]
    assert first["bus_id"] == "0000:18:00.0"
    assert first["uuid"] == "GPU-00000"
    assert first["numa_node"] == 0
    assert result.data["gpus"][7]["numa_node"] == 1
    assert first["clock_events"] == ["gpu_idle"]
    assert first["ecc_errors"] == {
        "volatile_uncorrected": 0,
        "volatile_corrected": 0,
        "aggregate_uncorrected": 0,
        "aggregate_corrected": 0,
    }
    gen = finding(result, "gpu0 pcie gen")
    assert gen.status == Status.PASS  # Gen1 of Gen5 is fine while idle
    assert gen.measured == 1
    assert "idle" in gen.display
    assert finding(result, "torch cuda").measured == "12.1"
    assert finding(result, "cudnn").measured == "9.1.0.70"
    assert result.data["torch"]["cudnn_package"] == "nvidia-cudnn-cu12"
    assert nv.calls == {"init": 1, "shutdown": 1}
    json.dumps(result.to_dict())  # every measured value is JSON-able


def test_gpu_at_x8_of_x16_fails(node):
    gpus = eight()
    gpus[3].width = 8
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    width = finding(result, "gpu3 pcie width")
    assert width.status == Status.FAIL
    assert (width.measured, width.expected) == (8, "x16")
    assert finding(result, "gpu2 pcie width").status == Status.PASS
    assert result.status == Status.FAIL
    assert "gpu3 pcie width x8 of x16" in result.summary


def test_low_link_generation_under_load_warns(node):
    gpus = eight()
    gpus[1].events = 0  # busy at full clocks
    gpus[1].gen = 3
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    gen = finding(result, "gpu1 pcie gen")
    assert gen.status == Status.WARN
    assert gen.display.startswith("Gen3 of Gen5 (not idle")
    assert result.status == Status.WARN


def test_persistence_off_fails_with_role_variable(node):
    gpus = eight()
    gpus[5].persistence = 0
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    persistence = finding(result, "gpu5 persistence")
    assert persistence.status == Status.FAIL
    assert persistence.measured == "off"
    assert "nvidia_driver_persistenced: true" in result.remedy
    assert "--tags nvidia_driver" in result.remedy
    relaxed = gpu.run_with(node.context(config(require_persistence=False)), fake_nvml(gpus))
    assert finding(relaxed, "gpu5 persistence").status == Status.PASS


def test_uncorrected_volatile_ecc_fails(node):
    gpus = eight()
    gpus[2].ecc = {
        (UNCORRECTED, VOLATILE): 2,
        (UNCORRECTED, AGGREGATE): 2,
        (CORRECTED, AGGREGATE): 40,
    }
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    ecc = finding(result, "gpu2 ecc")
    assert ecc.status == Status.FAIL
    assert ecc.measured["volatile_uncorrected"] == 2
    assert ecc.measured["aggregate_corrected"] == 40
    assert result.status == Status.FAIL


def test_uncorrected_aggregate_ecc_only_warns(node):
    gpus = eight()
    gpus[2].ecc = {(UNCORRECTED, AGGREGATE): 1}
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    assert finding(result, "gpu2 ecc").status == Status.WARN
    unlimited = gpu.run_with(
        node.context(config(max_uncorrected_ecc_aggregate=None)), fake_nvml(gpus)
    )
    assert finding(unlimited, "gpu2 ecc").status == Status.PASS


def test_ecc_not_supported_skips_unless_required(node):
    gpus = eight()
    gpus[0].ecc_mode = nvml.NVML_ERROR_NOT_SUPPORTED
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    assert finding(result, "gpu0 ecc").status == Status.SKIP
    assert result.status == Status.PASS
    strict = gpu.run_with(node.context(config(require_ecc=True)), fake_nvml(gpus))
    assert finding(strict, "gpu0 ecc").status == Status.FAIL


def test_ecc_disabled_fails_when_required(node):
    gpus = eight()
    gpus[4].ecc_mode = (0, 0)
    result = gpu.run_with(node.context(config(require_ecc=True)), fake_nvml(gpus))
    assert finding(result, "gpu4 ecc").measured == "off"
    assert finding(result, "gpu4 ecc").status == Status.FAIL


def test_thermal_throttle_fails_and_names_the_reason(node):
    gpus = eight()
    gpus[6].events = (
        pynvml.nvmlClocksThrottleReasonHwThermalSlowdown | pynvml.nvmlClocksThrottleReasonSwPowerCap
    )
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    clocks = finding(result, "gpu6 clocks")
    assert clocks.status == Status.FAIL
    assert clocks.measured == ["sw_power_cap", "hw_thermal_slowdown"]
    assert result.data["gpus"][6]["clock_events_mask"] == 0x44


def test_software_thermal_slowdown_warns_power_cap_passes(node):
    gpus = eight()
    gpus[0].events = pynvml.nvmlClocksThrottleReasonSwThermalSlowdown
    gpus[1].events = pynvml.nvmlClocksThrottleReasonSwPowerCap
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    assert finding(result, "gpu0 clocks").status == Status.WARN
    assert finding(result, "gpu1 clocks").status == Status.PASS
    assert finding(result, "gpu1 clocks").display == "sw_power_cap"


def test_old_pynvml_falls_back_to_throttle_reasons(node):
    gpus = eight()
    gpus[0].events = pynvml.nvmlClocksThrottleReasonHwSlowdown
    result = gpu.run_with(node.context(config()), fake_nvml(gpus, events_api=False))
    assert finding(result, "gpu0 clocks").measured == ["hw_slowdown"]


@pytest.mark.parametrize(
    ("driver_cuda", "status"),
    [(12040, Status.PASS), (12010, Status.PASS), (12000, Status.WARN), (11080, Status.FAIL)],
)
def test_driver_cuda_against_torch_cuda(node, driver_cuda, status):
    result = gpu.run_with(node.context(config()), fake_nvml(eight(), cuda=driver_cuda))
    torch = finding(result, "torch cuda")
    assert torch.status == status
    assert torch.expected == "driver CUDA >= 12.1"
    if status != Status.PASS:
        assert "nvidia_driver_branch" in result.remedy


def test_driver_below_profile_minimum_fails(node):
    result = gpu.run_with(
        node.context(config()), fake_nvml(eight(), driver="525.147.05", cuda=12000)
    )
    driver = finding(result, "driver")
    assert driver.status == Status.FAIL
    assert driver.measured == "525.147.05"
    assert "nvidia_driver_branch to 535" in result.remedy
    assert "cuda_check_min_driver_version" in result.remedy


def test_cpu_only_torch_on_a_gpu_node_fails(fake_host):
    add_torch(fake_host, version="2.4.0+cpu", cuda="None", cudnn=None)
    result = gpu.run_with(fake_host.context(config()), fake_nvml(eight()))
    torch = finding(result, "torch cuda")
    assert torch.status == Status.FAIL
    assert torch.display == "torch 2.4.0+cpu is a CPU-only build"
    assert "training_venv" in result.remedy
    assert finding(result, "cudnn").status == Status.SKIP


def test_missing_training_venv_warns(fake_host):
    result = gpu.run_with(fake_host.context(config()), fake_nvml(eight()))
    assert finding(result, "torch cuda").status == Status.WARN
    assert "no lib/python3*/site-packages under /opt/train" in result.summary


def test_gpu_missing_from_nvml_fails(node):
    result = gpu.run_with(node.context(config()), fake_nvml(eight()[:7]))
    count = finding(result, "gpus")
    assert (count.measured, count.status) == (7, Status.FAIL)
    assert count.display == "7 visible to NVML, 8 on the PCI bus: 1 missing"


def test_a_gpu_nvml_cannot_read_fails_the_check(node):
    gpus = eight()
    gpus[7].lost = True
    result = gpu.run_with(node.context(config()), fake_nvml(gpus))
    lost = finding(result, "gpu7")
    assert lost.status == Status.FAIL  # on the bus, unusable: unhealthy, not unknown
    assert lost.display == "NVML cannot read it: GPU is lost (NVML error 15)"
    assert result.status == Status.FAIL


@pytest.mark.parametrize("code", [9, 12])
def test_no_driver_skips_on_a_host_without_gpus(fake_host, code):
    add_torch(fake_host)
    nv = fake_nvml([], init_error=code)
    result = gpu.run_with(fake_host.context(config()), nv)
    assert result.status == Status.SKIP
    assert FakeNVMLError.TEXT[code] in result.summary
    assert result.data["torch"]["cuda"] == "12.1"
    assert nv.calls["shutdown"] == 0


def test_no_driver_fails_when_a_gpu_is_required(fake_host):
    result = gpu.run_with(
        fake_host.context(config(), require_gpu=True), fake_nvml([], init_error=12)
    )
    assert result.status == Status.FAIL
    assert finding(result, "driver").measured == "NVML Shared Library Not Found (NVML error 12)"
    assert "nvidia_driver_branch" in result.remedy


def test_no_driver_fails_when_the_pci_bus_has_nvidia_gpus(node):
    result = gpu.run_with(node.context(config()), fake_nvml([], init_error=9))
    assert result.status == Status.FAIL
    assert "8 NVIDIA GPU(s) on the PCI bus" in result.summary


def test_driver_without_gpus(fake_host):
    add_torch(fake_host)
    assert gpu.run_with(fake_host.context(config()), fake_nvml([])).status == Status.SKIP
    required = gpu.run_with(fake_host.context(config(), require_gpu=True), fake_nvml([]))
    assert finding(required, "gpus").status == Status.FAIL


def test_pynvml_not_installed(fake_host):
    result = gpu.run_with(fake_host.context(config()), None)
    assert result.status == Status.SKIP
    assert "nvidia-ml-py" in result.summary


def test_spec_run_uses_the_pynvml_module(node, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(eight()))
    result = gpu.SPEC.run(node.context(config()))
    assert result.data["nvml_gpu_count"] == 8


def test_abi_constants_match_pynvml():
    for name in (
        "NVML_ERROR_NOT_SUPPORTED",
        "NVML_ERROR_FUNCTION_NOT_FOUND",
        "NVML_MEMORY_ERROR_TYPE_CORRECTED",
        "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
        "NVML_VOLATILE_ECC",
        "NVML_AGGREGATE_ECC",
        "NVML_FEATURE_ENABLED",
    ):
        assert getattr(nvml, name) == getattr(pynvml, name), name
    for bit, name in nvml.CLOCK_EVENTS.items():
        camel = "".join(part.capitalize() for part in name.split("_"))
        assert getattr(pynvml, f"nvmlClocksThrottleReason{camel}") == bit, name
    for function in (
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetGpuMaxPcieLinkGeneration",
        "nvmlDeviceGetTotalEccErrors",
    ):
        assert callable(getattr(pynvml, function)), function


# ---------------------------------------------------------------- parsers


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=5))
def test_version_round_trip(parts):
    version = tuple(parts)
    assert cuda_compat.parse_version(cuda_compat.format_version(version)) == version


@given(st.text(max_size=20))
def test_parse_version_never_raises(text):
    version = cuda_compat.parse_version(text)
    assert version is None or all(isinstance(p, int) for p in version)


@given(st.integers(1, 99), st.integers(0, 99))
def test_cuda_int_round_trip(major, minor):
    assert cuda_compat.cuda_from_int(major * 1000 + minor * 10) == (major, minor)


@given(st.lists(st.integers(0, 999), min_size=1, max_size=4), st.integers(0, 3))
def test_at_least_ignores_trailing_zeros(parts, zeros):
    version = tuple(parts)
    padded = version + (0,) * zeros
    assert cuda_compat.at_least(version, padded) and cuda_compat.at_least(padded, version)
    assert not cuda_compat.at_least(version, (*version[:-1], version[-1] + 1))


@given(st.integers(0, 2**64 - 1))
def test_clock_events_decode_covers_every_bit(mask):
    names = nvml.decode_clock_events(mask)
    by_name = {name: bit for bit, name in nvml.CLOCK_EVENTS.items()}
    known = sum(by_name[n] for n in names if n in by_name)
    unknown = [n for n in names if n not in by_name]
    rest = int(unknown[0].removeprefix("unknown_0x"), 16) if unknown else 0
    assert known | rest == mask and known & rest == 0


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7))
def test_nvml_bus_id_normalizes_to_sysfs_name(domain, bus, device, function):
    bus_id = f"{domain:08X}:{bus:02X}:{device:02X}.{function}"
    sysfs = f"{domain:04x}:{bus:02x}:{device:02x}.{function}"
    assert nvml.normalize_bus_id(bus_id.encode()) == sysfs


@given(st.text(max_size=30))
def test_normalize_bus_id_never_crashes(text):
    assert isinstance(nvml.normalize_bus_id(text), str)


literal = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))
identifier = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


@given(st.dictionaries(identifier, literal, max_size=6), st.booleans())
def test_version_py_round_trip(values, annotated):
    lines = ["from typing import Optional", "import os", "not_a_literal = os.getcwd()"]
    for key, value in values.items():
        lines.append(f"{key}: Optional[str] = {value!r}" if annotated else f"{key} = {value!r}")
    parsed = torch_probe.parse_version_py("\n".join(lines))
    assert parsed == values


@given(st.text(max_size=200))
def test_parse_version_py_never_crashes(text):
    assert isinstance(torch_probe.parse_version_py(text), dict)


# ---------------------------------------------------------------- this machine

REAL = config(training_venv=None, min_driver_version=None)


def _python(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.real
def test_real_nvml_state_matches_the_check():
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        reason = str(exc)
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver; covered by the fake-NVML tests")
    result = gpu.run(CheckContext(System(), REAL))
    pci_gpus = result.data["pci_gpus"]
    assert result.status == (Status.FAIL if pci_gpus else Status.SKIP)
    assert reason in (result.summary or "")
    required = gpu.run(CheckContext(System(), REAL, require_gpu=True))
    assert required.status == Status.FAIL


@pytest.mark.real
def test_real_torch_versions_read_without_import_match_import():
    result = gpu.run(CheckContext(System(), REAL))
    torch = result.data["torch"]
    imported = json.loads(
        _python(
            "import json, torch; v = torch.backends.cudnn.version(); "
            "print(json.dumps([torch.__version__, torch.version.cuda, v]))"
        )
    )
    assert torch["version"] == imported[0]
    assert torch["cuda"] == imported[1]
    if imported[2] is None:
        assert torch["cudnn"] is None
    else:  # 90100 -> 9.1
        assert cuda_compat.parse_version(torch["cudnn"])[:2] == (
            imported[2] // 10000,
            imported[2] // 100 % 100,
        )


def _cpu_seconds() -> float:
    """User and system CPU seconds of this process and of the children it waited for."""
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(usage.ru_utime + usage.ru_stime for usage in used)


@pytest.mark.real
def test_real_check_is_cheap_and_never_imports_torch():
    """The check reads torch's versions from its files: importing torch, here or in a
    child process, would cost seconds of CPU. CPU time, not wall time: a loaded machine
    stretched 0.16 s of CPU to 1.04 s of wall time."""
    code = (
        "import resource, sys; "
        "from hostcheck.checks import gpu; from hostcheck.checks.base import CheckContext; "
        "from hostcheck.system import System; "
        f"gpu.run(CheckContext(System(), {REAL!r})); "
        "used = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]; "
        "print(sum(u.ru_utime + u.ru_stime for u in used), 'torch' in sys.modules)"
    )
    spent, imported = _python(code).split()
    assert imported == "False"
    assert float(spent) < 1.0
    started = _cpu_seconds()
    gpu.run(CheckContext(System(), REAL))
    assert _cpu_seconds() - started < 0.5
