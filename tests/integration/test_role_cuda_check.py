"""The cuda_check role over SSH on a sandbox host, which has no GPU: first as it is (no driver,
no venv), then made to look like a GPU host (tests/integration/cuda_fakes.py: a fake
libnvidia-ml.so.1 per driver version that the real pynvml loads, fake torch builds, a CUDA
toolkit's version files and cuDNN's header and library names) so that the role's decision runs
end to end. The role must only read: every run reports changed=0."""

from __future__ import annotations

import importlib.metadata
import tarfile

import pytest

from tests.integration.ansible import run_playbook
from tests.integration.cases import case_name, cases_of, refusal, run_cases
from tests.integration.cuda_fakes import (
    DRIVERS,
    TORCHES,
    gpu_host_tree,
    torch_files,
    write_tree,
)
from tests.support.fake_libnvml import build_fake_nvml, gcc_missing

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/cuda_check/*",
    "plugins/*/cuda_check_*",
    "plugins/module_utils/cuda_compat.py",
    "plugins/module_utils/pci.py",
    "tests/integration/cuda_fakes.py",
    "tests/support/fake_libnvml.py",
    "tests/integration/playbooks/cuda_check*.yml",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/cuda_check.yml"
SETUP = "tests/integration/playbooks/cuda_check_fake_gpu.yml"
FAKE_VENV = "/opt/venvs/fakecuda"
LIBRARY = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
CHECK = "cuda_check : Check the driver, CUDA, cuDNN and torch versions (changes nothing)"
VERIFY = "cuda_check : Verify the driver, CUDA, cuDNN and torch versions (changes nothing)"
NO_LIBRARY = "NVML Shared Library Not Found"
# What the fake GPU host has besides driver and torch, as the role shows it.
HOST_ROWS = [
    "NVIDIA GPUs on PCI  0",
    "CUDA toolkits       11.8.89 /usr/local/cuda-11.8; 12.4.1 /usr/local/cuda-12.4; "
    "12.4.1 /usr/local/cuda -> /usr/local/cuda-12.4",
    "cuDNN header        9.1.0 /usr/include/cudnn_version.h",
    "cuDNN library       9.1.0 /usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0",
]
CU124_ROWS = [
    f"torch               2.5.1+cu124 in {FAKE_VENV}",
    "torch CUDA          12.4",
    "torch cuDNN         9.1.0",
]


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("cudacheck", hosts=1)


@pytest.fixture(scope="module")
def host(fleet):
    (only,) = fleet.hosts()
    return only


def run(fleet, check: bool = False, tags: str | None = None, **extra):
    return run_playbook(fleet, PLAYBOOK, extra_vars=extra or None, check=check, tags=tags)


def fake(fleet, **extra):
    return run(fleet, cuda_check_venv=FAKE_VENV, **extra)


def passed(done, host) -> list[str]:
    """The versions the role showed, after checking the run passed and changed nothing, and
    that verify.yml took the check of the same run instead of reading the host again."""
    assert done.returncode == 0, done.failure_text(host.name)
    assert done.changed(host.name) == 0
    checked = done.task_results(CHECK)[host.name]
    verified = done.task_results(VERIFY).get(host.name)
    if verified is not None:  # (check mode ends before verify.yml)
        assert verified["msg"] == f"checked earlier in this run: {checked['msg']}"
        assert verified["versions"] == checked["versions"]
    return checked["versions"]


def failed(done, host, task: str = CHECK) -> list[str]:
    """The failure message's lines (versions side by side, then one line per problem), which
    are the versions the task shows too."""
    assert done.returncode != 0 and done.failed_hosts() == [host.name]
    assert done.changed(host.name) == 0
    result = done.task_results(task)[host.name]
    assert result["versions"] == result["msg"].splitlines()
    return result["msg"].splitlines()


def use_driver(fleet, host, name: str | None) -> None:
    """Put one fake driver library where the real one goes (None: no driver library)."""
    link = f"ln -sf /opt/fake-nvidia/{name}/libnvidia-ml.so.1 {LIBRARY}" if name else "true"
    done = fleet.ssh(host, f"rm -f {LIBRARY} && {link} && ldconfig")
    assert done.returncode == 0, done.stderr


def use_torch(fleet, host, name: str) -> None:
    site = f"$(echo {FAKE_VENV}/lib/python3*/site-packages)"
    done = fleet.ssh(host, f"echo /opt/fake-torch/{name} > {site}/fake_torch.pth")
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def gpu_host(fleet, host, tmp_path_factory):
    """The host made to look like a GPU host: fake parts unpacked, no driver library linked."""
    if gcc_missing():
        pytest.skip(gcc_missing())
    root = tmp_path_factory.mktemp("fake-gpu")
    tree = root / "tree"
    for name, (driver, cuda, init_error) in DRIVERS.items():
        build_fake_nvml(tree / "opt" / "fake-nvidia" / name, driver, cuda, 8, init_error)
    for name, build in TORCHES.items():
        write_tree(tree / "opt" / "fake-torch" / name, torch_files(*build))
    gpu_host_tree(tree)
    tarball = root / "fake-gpu.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        # files and links only: no directory entry may change the metadata of / or /usr
        for path in sorted(tree.rglob("*")):
            if path.is_symlink() or not path.is_dir():
                tar.add(path, arcname=str(path.relative_to(tree)), recursive=False)
    extra = {
        "fake_tree": str(tarball),
        "fake_venv": FAKE_VENV,
        "pynvml_version": importlib.metadata.version("nvidia-ml-py"),
    }
    done = run_playbook(fleet, SETUP, extra_vars=extra)
    assert done.returncode == 0, done.stderr
    use_torch(fleet, host, "cu124")
    return host


# ---------------------------------------------------------------- bad input


BAD_INPUT = [
    (
        {"cuda_check_toolkit_version": "twelve"},
        'cuda_check_toolkit_version: "" or a version of dotted digits such as "12.4"',
    ),
    (
        {"cuda_check_min_driver_version": 550.54},
        "(unquoted, YAML reads 12.10 as the number 12.1); got 550.54",
    ),
    (
        {"cuda_check_without_driver": "maybe"},
        "value of cuda_check_without_driver must be one of: fail, skip, got: maybe",
    ),
    (
        {"cuda_check_venv": "venvs/train"},
        'cuda_check_venv: the absolute path of the training venv, without blanks; got "venvs/',
    ),
    (
        {"cuda_check_cudnn_library_paths": ["lib64"]},
        'cuda_check_cudnn_library_paths: a list of absolute paths; got ["lib64"]',
    ),
]
BAD_INPUT_IDS = ["version", "unquoted version", "without_driver", "relative venv", "relative path"]


@pytest.fixture(scope="module")
def bad_input_run(fleet, host):
    """Every bad value in one run, a case each (tests/integration/cases.py)."""
    return run_cases(fleet, host, PLAYBOOK, cases_of(BAD_INPUT))


@pytest.mark.parametrize(
    ("index", "message"), [(i, m) for i, (_, m) in enumerate(BAD_INPUT)], ids=BAD_INPUT_IDS
)
def test_bad_input_fails_naming_the_variable_before_anything_else(bad_input_run, index, message):
    done = bad_input_run
    assert message in refusal(done, index)
    assert case_name(index) not in done.task_results(CHECK)  # the host was never read


# ---------------------------------------------------------------- the host as it is


def test_no_venv_and_no_driver_skips(fleet, host):
    """The sandbox host as it comes: no NVIDIA driver and no training venv yet. The OS python
    reads what it can (no pynvml there), and the role skips with cuda_check_without_driver's
    default, saying "no NVIDIA driver"."""
    done = run(fleet)
    passed(done, host)
    assert done.task_results(CHECK)[host.name]["msg"] == (
        f"cuda_check_venv: /opt/venvs/train has no bin/python on {host.name}; the versions are "
        "read with /usr/bin/python3, which may lack pynvml and torch; "
        "skip: no NVIDIA driver (NVML: pynvml (nvidia-ml-py) cannot be imported by "
        "/usr/bin/python3: No module named 'pynvml') (cuda_check_without_driver: skip)"
    )


def test_no_driver_skips_or_fails_as_the_variable_says(fleet, gpu_host):
    """pynvml installed, no libnvidia-ml.so.1: NVML is not there, so no driver."""
    use_driver(fleet, gpu_host, None)
    skip = fake(fleet)
    shown = passed(skip, gpu_host)
    assert shown[0] == f"cuda_check: skip: no NVIDIA driver (NVML: {NO_LIBRARY})"
    assert shown[1] == f"NVIDIA driver       none (NVML: {NO_LIBRARY})"
    assert skip.task_results(CHECK)[gpu_host.name]["msg"] == (
        f"skip: no NVIDIA driver (NVML: {NO_LIBRARY}) (cuda_check_without_driver: skip)"
    )
    lines = failed(fake(fleet, cuda_check_without_driver="fail"), gpu_host)
    assert lines[0] == f"cuda_check: fail: no NVIDIA driver (NVML: {NO_LIBRARY})"
    assert lines[-1] == (
        f"problem: cuda_check_without_driver: fail: no NVIDIA driver (NVML: {NO_LIBRARY})"
    )
    # a library without its kernel module is no driver either
    use_driver(fleet, gpu_host, "not-loaded")
    lines = failed(fake(fleet, cuda_check_without_driver="fail"), gpu_host)
    assert lines[0] == "cuda_check: fail: no NVIDIA driver (NVML: Driver Not Loaded)"


# ---------------------------------------------------------------- a host that looks like a GPU host


def test_a_driver_that_runs_torch_passes_also_in_check_mode(fleet, gpu_host):
    use_driver(fleet, gpu_host, "550")
    use_torch(fleet, gpu_host, "cu124")
    asked = {
        "cuda_check_without_driver": "fail",
        "cuda_check_min_driver_version": "550.54",
        "cuda_check_min_cuda_version": "12.4",
        "cuda_check_toolkit_version": "12.4",
        "cuda_check_cudnn_version": "9.1",
        "cuda_check_torch_cuda_version": "12.4",
    }
    expected = [
        "cuda_check: pass: driver 550.54.15 (CUDA 12.4) can run torch 2.5.1+cu124",
        "NVIDIA driver       550.54.15 (NVML; 8 GPU(s))",
        "driver CUDA         12.4",
        *HOST_ROWS,
        *CU124_ROWS,
    ]
    assert passed(fake(fleet, **asked), gpu_host) == expected
    assert passed(fake(fleet, check=True, **asked), gpu_host) == expected


def test_minor_version_compatibility_passes_with_a_warning(fleet, gpu_host):
    use_driver(fleet, gpu_host, "535")
    use_torch(fleet, gpu_host, "cu124")
    shown = passed(fake(fleet), gpu_host)
    assert shown[0] == "cuda_check: pass: driver 535.104.05 (CUDA 12.2) can run torch 2.5.1+cu124"
    assert shown[1:3] == [
        "NVIDIA driver       535.104.05 (NVML; 8 GPU(s))",
        "driver CUDA         12.2",
    ]
    assert shown[-1] == (
        "warning: driver 535.104.05 supports CUDA 12.2, torch is built for CUDA 12.4: runs "
        "through CUDA minor version compatibility (driver >= 525.60.13); PTX JIT of code newer "
        "than CUDA 12.2 is not available"
    )


def test_an_old_driver_fails_with_all_versions_side_by_side_and_verify_notices(fleet, gpu_host):
    use_driver(fleet, gpu_host, "550")
    use_torch(fleet, gpu_host, "cu124")
    passed(fake(fleet), gpu_host)
    use_driver(fleet, gpu_host, "470")  # the driver changed after provisioning
    problem = (
        f"problem: cuda_check_venv: torch 2.5.1+cu124 in {FAKE_VENV} is built for CUDA 12.4; "
        "driver 470.239.06 supports CUDA 11.4 only (needs driver CUDA >= 12.4, or a 12.x "
        "driver >= 525.60.13 (minor version compatibility))"
    )
    expected = [
        "cuda_check: fail: 1 problem(s)",
        "NVIDIA driver       470.239.06 (NVML; 8 GPU(s))",
        "driver CUDA         11.4",
        *HOST_ROWS,
        *CU124_ROWS,
        problem,
    ]
    verify = fake(fleet, tags="verify")
    assert failed(verify, gpu_host, VERIFY) == expected
    assert verify.task_results(CHECK) == {}  # verify.yml alone read the host itself
    assert failed(fake(fleet), gpu_host) == expected


def test_versions_asked_for_and_missing_each_name_their_variable(fleet, gpu_host):
    use_driver(fleet, gpu_host, "550")
    use_torch(fleet, gpu_host, "cu124")
    lines = failed(
        fake(
            fleet,
            cuda_check_min_driver_version="555",
            cuda_check_min_cuda_version="12.6",
            cuda_check_toolkit_version="12.6",
            cuda_check_cudnn_version="8",
            cuda_check_torch_cuda_version="12.1",
        ),
        gpu_host,
    )
    assert lines[0] == "cuda_check: fail: 6 problem(s)"
    assert [line.split(":")[1].strip() for line in lines if line.startswith("problem:")] == [
        "cuda_check_min_driver_version",
        "cuda_check_min_cuda_version",
        "cuda_check_toolkit_version",
        "cuda_check_cudnn_version",
        "cuda_check_cudnn_version",
        "cuda_check_torch_cuda_version",
    ]
    assert "problem: cuda_check_min_driver_version: driver 550.54.15 is older than 555" in lines


def test_a_cpu_torch_on_a_driver_host_fails_unless_allowed(fleet, gpu_host):
    use_driver(fleet, gpu_host, "550")
    use_torch(fleet, gpu_host, "cpu")
    try:
        lines = failed(fake(fleet), gpu_host)
        assert lines[-4:] == [
            f"torch               2.5.1+cpu in {FAKE_VENV}",
            "torch CUDA          CPU-only build",
            "torch cuDNN         -",
            f"problem: cuda_check_require_torch_cuda: torch 2.5.1+cpu in {FAKE_VENV} is a "
            "CPU-only build, on a host with a driver",
        ]
        shown = passed(fake(fleet, cuda_check_require_torch_cuda=False), gpu_host)
        assert shown[-1] == (
            f"warning: torch 2.5.1+cpu in {FAKE_VENV} is a CPU-only build (allowed: "
            "cuda_check_require_torch_cuda is false)"
        )
    finally:
        use_torch(fleet, gpu_host, "cu124")


def test_switched_off_it_reads_nothing(fleet, gpu_host):
    use_driver(fleet, gpu_host, "470")  # would fail
    done = fake(fleet, cuda_check_enabled=False)
    assert done.returncode == 0, done.failure_text(gpu_host.name)
    assert done.changed(gpu_host.name) == 0
    for task in (CHECK, VERIFY):
        said = done.task_results(task)[gpu_host.name]
        assert said["msg"] == (
            "cuda_check_enabled is false: driver, CUDA, cuDNN and torch versions not checked"
        )
        assert "versions" not in said  # nothing was read
