"""`hostcheck job`'s GPU utilization: NVML sampled while real DataLoader jobs run, through the
sandbox's fake libnvidia-ml.so.1 (tests/sandbox/fake_nvml.c), whose answers come from a state
file each job rewrites as it goes (busy during its step, idle while it waits for data); and
the steady-part arithmetic, the choice of GPUs and the verdict on plain data.
"""

from __future__ import annotations

import textwrap

import pytest

from hostcheck.job import gpu_use
from hostcheck.job.gpu_use import GpuTrace, GpuUse
from hostcheck.model import CheckResult, Finding, Status
from tests.support.fake_libnvml import build_fake_nvml, gcc_missing
from tests.support.job_runs import JOB_RUN_COVERS, checks_by_id, hostcheck_job

# Runs real DataLoader jobs (seconds each): out of the gate, chosen when what they cover
# changes (tests/selection.py)
COVERS = (*JOB_RUN_COVERS, "tests/support/fake_libnvml.py", "tests/sandbox/fake_nvml.c")

GIB = 1 << 30

# The job's side of the fake NVML: what GPU `index` shows from now on.
STATE_WRITER = """
STATE = os.environ["FAKE_NVML_STATE"]
def gpu(index, util, **more):
    words = " ".join(f"{key}={value}" for key, value in more.items())
    with open(STATE + ".partial", "w") as stream:
        stream.write(f"{index} util={util} pids={os.getpid()} {words}\\n")
    os.replace(STATE + ".partial", STATE)
"""


@pytest.fixture(scope="session")
def fake_nvml_libraries(tmp_path_factory):
    """Folders holding a libnvidia-ml.so.1: two GPUs, none, and a driver not loaded."""
    if gcc_missing():
        pytest.skip(gcc_missing())
    pytest.importorskip("torch", reason="hostcheck job's tests run PyTorch jobs")
    pytest.importorskip("pynvml", reason="the sampler reads NVML through pynvml")
    root = tmp_path_factory.mktemp("fake-nvml")
    folders = {"two-gpus": root / "two", "no-gpu": root / "none", "no-driver": root / "off"}
    build_fake_nvml(folders["two-gpus"], gpus=2)
    build_fake_nvml(folders["no-gpu"], gpus=0)
    build_fake_nvml(folders["no-driver"], init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    return folders


def run_with_fake_gpus(tmp_path, libraries, script, *options, library="two-gpus"):
    env = {
        "LD_LIBRARY_PATH": str(libraries[library]),
        "FAKE_NVML_STATE": str(tmp_path / "nvml-state"),
    }
    return hostcheck_job(tmp_path, STATE_WRITER + textwrap.dedent(script), *options, env=env)


def test_gpu_idle_while_the_job_waits_for_data_is_one_finding(tmp_path, fake_nvml_libraries):
    """num_workers=0: each batch takes 8 x 20 ms to load while the GPU idles, then the GPU
    computes for 40 ms. Busy about 20 % of the time (load only stretches the eight loading
    sleeps more than the one step); the data-wait fails too, and the GPU's verdict is the one
    finding that ties the two, with the data-wait's remedy. Memory peaks before the loop
    (the peak is over the whole run)."""
    code, document, err = run_with_fake_gpus(
        tmp_path,
        fake_nvml_libraries,
        """
        gpu(0, 0, memory_used=2 * 1024**3, pcie_rx=50000)  # the model moves to the GPU
        time.sleep(1.0)
        loader = DataLoader(Slow(8 * 24, 0.02), batch_size=8, num_workers=0)
        for x, y in loader:
            gpu(0, 100, memory_used=1024**3, pcie_rx=50000)
            time.sleep(0.04)
            gpu(0, 0, memory_used=1024**3, pcie_rx=50000)
        """,
    )
    assert code == 1, err
    checks = checks_by_id(document)
    shown = document["job"]["gpu"]
    assert shown["problem"] is None and shown["chosen_by"] == "processes"
    (used,) = shown["gpus"]
    assert (used["index"], used["name"]) == (0, "NVIDIA Fake GPU")
    assert used["job_pids"] == [document["job"]["ranks"][0]["pid"]]
    assert used["steady_samples"] >= gpu_use.MIN_SAMPLES
    assert used["utilization_mean"] < 0.5  # about 0.2
    assert used["memory_used_peak_bytes"] == 2 * GIB
    assert used["pcie_rx_bytes_per_s_mean"] == 50000 * 1024  # the same in every sample
    assert used["pcie_tx_bytes_per_s_mean"] is None  # not supported: absent

    loader_wait = next(f for f in checks["job-loader1"]["findings"] if f["name"] == "data-wait")
    assert loader_wait["status"] == "fail"
    gpu_check = checks["job-gpu"]
    assert gpu_check["status"] == "fail"
    (finding,) = gpu_check["findings"]
    assert finding["display"] == (
        f"GPU 0 busy {used['utilization_mean']:.0%} of the steady run (median "
        f"{used['utilization_median']:.0%}) while the job waited for data "
        f"{loader_wait['measured']:.0%} of step time (job-loader1): the GPU waits for the "
        "DataLoader"
    )
    assert finding["remedy"] == loader_wait["remedy"]
    assert "num_workers > 0" in finding["remedy"]
    assert gpu_check["summary"] == finding["display"]


def test_busy_gpu_of_a_fed_job_passes_with_its_figure(tmp_path, fake_nvml_libraries):
    """Two workers feed 150 ms steps; the job's GPU 1 turns busy at its first batch and
    stays so (kernels queued ahead) until the loop ends, then idles a second. Idle while
    torch loads and after the loop, busy over the steady part: 100 % there, exactly."""
    _, document, err = run_with_fake_gpus(
        tmp_path,
        fake_nvml_libraries,
        """
        loader = DataLoader(Slow(4 * 12, 0.0005), batch_size=4, num_workers=2,
                            persistent_workers=True)
        for epoch in range(2):
            for x, y in loader:
                gpu(1, 100, memory_used=3 * 1024**3, pcie_tx=1000, pcie_rx=2000)
                time.sleep(0.15)
        gpu(1, 0, memory_used=0)
        time.sleep(1.0)
        """,
    )
    shown = document["job"]["gpu"]
    assert shown["chosen_by"] == "processes", err
    (used,) = shown["gpus"]  # GPU 0 had none of the job's processes
    assert used["index"] == 1
    assert (used["utilization_mean"], used["utilization_median"]) == (1.0, 1.0)
    assert used["steady_samples"] >= gpu_use.MIN_SAMPLES
    assert used["samples"] > used["steady_samples"] + 3  # the idle second after the loop
    assert used["memory_used_peak_bytes"] == 3 * GIB
    assert (used["pcie_rx_bytes_per_s_mean"], used["pcie_tx_bytes_per_s_mean"]) == (
        2000 * 1024,
        1000 * 1024,
    )
    gpu_check = checks_by_id(document)["job-gpu"]
    assert gpu_check["status"] == "pass"
    assert gpu_check["summary"] == "GPU 1 busy 100% of the steady run (median 100%)"
    assert gpu_check["findings"][0]["measured"] == 1.0


def test_gpu_underused_with_the_data_wait_fine_says_another_reason(tmp_path, fake_nvml_libraries):
    """The same fed job with its GPU at 30 % throughout: the data-wait is within its limit
    (raised to 50 %: a loaded machine delays the hand-over), so the GPU idles for another
    reason, and the remedy looks at the step."""
    _, document, err = run_with_fake_gpus(
        tmp_path,
        fake_nvml_libraries,
        """
        gpu(0, 30)
        loader = DataLoader(Slow(4 * 12, 0.0005), batch_size=4, num_workers=2,
                            persistent_workers=True)
        for x, y in loader:
            time.sleep(0.15)
        """,
        "--set",
        "loop.max_data_wait=0.5",
    )
    checks = checks_by_id(document)
    assert checks["job-loader1"]["status"] == "pass", err
    gpu_check = checks["job-gpu"]
    assert gpu_check["status"] == "fail"
    (finding,) = gpu_check["findings"]
    assert finding["measured"] == 0.3
    assert finding["display"] == (
        "GPU 0 busy 30% of the steady run (median 30%) with no loader failing its data-wait: "
        "the GPU is underused for a reason other than data loading"
    )
    assert finding["remedy"] == gpu_use.NOT_DATA_REMEDY


@pytest.mark.parametrize(
    ("library", "reason"),
    [
        ("no-driver", "no NVIDIA driver (NVML: Driver Not Loaded (NVML error 9))"),
        ("no-gpu", "no GPU: the NVIDIA driver is loaded but shows none"),
    ],
)
def test_without_nvml_or_gpu_the_check_skips_saying_why(
    tmp_path, fake_nvml_libraries, library, reason
):
    code, document, err = run_with_fake_gpus(
        tmp_path,
        fake_nvml_libraries,
        """
        for x, y in DataLoader(Slow(4 * 6, 0.001), batch_size=4, num_workers=0):
            time.sleep(0.01)
        """,
        "--set",
        "loop.max_data_wait=1",
        library=library,
    )
    assert code == 0, err
    gpu_check = checks_by_id(document)["job-gpu"]
    assert gpu_check["status"] == "skip"
    assert gpu_check["summary"] == f"GPU utilization not measured: {reason}"
    assert document["job"]["gpu"]["problem"] == reason
    assert document["job"]["gpu"]["gpus"] == []
    assert document["verdict"] == "pass"
    assert document["counts"]["skip"] == 1


# ------------------------------------------------------------------ on plain data


def trace(index, samples, uuid=None, job_pids=()):
    """A GPU's trace from (time, utilization percent or None, memory bytes) samples."""
    made = GpuTrace(index, "GPU", uuid or f"GPU-{index:04d}", job_pids=set(job_pids))
    for at, utilization, memory in samples:
        made.at.append(at)
        made.utilization.append(gpu_use.NO_VALUE if utilization is None else utilization)
        made.memory_used.append(memory)
        made.pcie_tx.append(gpu_use.NO_VALUE)
        made.pcie_rx.append(10)
    return made


def process(pid, *loaders):
    """A probe's process document with loaders given as (first steady batch, last batch)."""
    return {
        "pid": pid,
        "loaders": [{"first_steady_at": began, "last_batch_at": ended} for began, ended in loaders],
    }


def test_steady_window_runs_from_the_first_steady_batch_to_the_last_batch():
    processes = [process(10, (105.0, 120.0), (None, 101.0)), process(11, (103.0, 118.0))]
    assert gpu_use.steady_window(processes) == (103.0, 120.0)
    assert gpu_use.steady_window(processes, {10}) == (105.0, 120.0)
    assert gpu_use.steady_window(processes, {99}) == (103.0, 120.0)  # none of them: all
    assert gpu_use.steady_window([process(10, (None, 101.0))]) is None


def test_utilization_is_averaged_over_the_steady_part_only():
    """Idle start-up and tail outside the window; a sample without utilization is left out;
    memory peaks over the whole run."""
    samples = [(100.0, 0, 5 * GIB), (101.0, 0, 0)]  # start-up: the peak is here
    samples += [(102.0, 90, GIB), (102.5, None, GIB), (103.0, 60, GIB), (104.0, 30, GIB)]
    samples += [(106.0, 0, 0)]  # after the last batch
    summary = gpu_use.summarize(trace(0, samples), (102.0, 104.0))
    assert summary["utilization_mean"] == 0.6
    assert summary["utilization_median"] == 0.6
    assert (summary["samples"], summary["steady_samples"]) == (7, 3)
    assert summary["memory_used_peak_bytes"] == 5 * GIB
    assert summary["pcie_rx_bytes_per_s_mean"] == 10 * 1024
    assert summary["pcie_tx_bytes_per_s_mean"] is None
    too_few = gpu_use.summarize(trace(0, samples), (102.9, 103.5))
    assert (too_few["steady_samples"], too_few["utilization_mean"]) == (1, None)


@pytest.mark.parametrize(
    ("visible", "job_pids", "expected"),
    [
        (None, {1: {42}}, ([1], "processes")),
        ("0", {1: {42}}, ([1], "processes")),  # NVML's answer wins
        ("2,0", {}, ([2, 0], "CUDA_VISIBLE_DEVICES")),
        ("GPU-0003", {}, ([3], "CUDA_VISIBLE_DEVICES")),
        ("1,7,2", {}, ([1], "CUDA_VISIBLE_DEVICES")),  # CUDA stops at the first unknown
        ("", {}, ([], "CUDA_VISIBLE_DEVICES")),
        ("-1", {}, ([], "CUDA_VISIBLE_DEVICES")),
        ("MIG-5c4d", {}, ([0, 1, 2, 3], "all")),
        (None, {}, ([0, 1, 2, 3], "all")),
    ],
)
def test_the_gpus_the_job_used(visible, job_pids, expected):
    use = GpuUse(None, visible, [trace(i, [], job_pids=job_pids.get(i, ())) for i in range(4)])
    gpus, how = gpu_use.used_gpus(use)
    assert ([g.index for g in gpus], how) == expected


def test_an_idle_gpu_is_tied_to_the_data_wait_of_its_own_processes():
    """Two ranks on two GPUs: GPU 1 idles, its rank (pid 11) waits for data; rank 0's worse
    wait is another GPU's story."""

    def loader_result(check_id, fraction, status, remedy):
        wait = Finding("data-wait", status, fraction, "<= 5%", remedy=remedy)
        return CheckResult.from_findings(check_id, [wait])

    results = [
        (10, loader_result("job-rank0-loader1", 0.8, Status.FAIL, "rank 0's remedy")),
        (11, loader_result("job-rank1-loader1", 0.4, Status.FAIL, "rank 1's remedy")),
    ]
    busy = [(t, 95, GIB) for t in (1.0, 2.0, 3.0)]
    idle = [(t, 20, GIB) for t in (1.0, 2.0, 3.0)]
    use = GpuUse(None, None, [trace(0, busy, job_pids={10}), trace(1, idle, job_pids={11})])
    processes = [process(10, (1.0, 3.0)), process(11, (1.0, 3.0))]
    result = gpu_use.check(use, processes, results, 0.7)
    assert result.status == Status.FAIL
    first, second = result.findings
    assert (first.status, first.measured) == (Status.PASS, 0.95)
    assert second.status == Status.FAIL
    assert "waited for data 40% of step time (job-rank1-loader1)" in second.display
    assert second.remedy == "rank 1's remedy"
    assert result.summary == second.display

    fed = [(pid, loader_result(r.id, 0.01, Status.PASS, "")) for pid, r in results]
    other = gpu_use.check(use, processes, fed, 0.7).findings[1]
    assert "reason other than data loading" in other.display
    assert other.remedy == gpu_use.NOT_DATA_REMEDY


def test_no_steady_batch_or_no_gpu_used_skips_in_one_line():
    use = GpuUse(None, None, [trace(0, [(1.0, 0, 0)])])
    skipped = gpu_use.check(use, [process(10, (None, 1.0))], [], 0.7)
    assert skipped.status == Status.SKIP
    assert skipped.summary == (
        "GPU utilization not judged: no steady batch (the job's data-wait neither)"
    )
    hidden = GpuUse(None, "", [trace(0, [(1.0, 0, 0)])])
    skipped = gpu_use.check(hidden, [process(10, (1.0, 2.0))], [], 0.7)
    assert (skipped.status, skipped.summary) == (
        Status.SKIP,
        "the job used no GPU (CUDA_VISIBLE_DEVICES='')",
    )
