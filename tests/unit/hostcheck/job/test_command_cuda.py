"""`hostcheck job` on the CUDA paths: pinned batches, non_blocking copies and the
side-stream prefetcher of the seed articles (the apex data_prefetcher pattern).

Written to PyTorch's documented behaviour (DataLoader(pin_memory=True) hands over batches
in page-locked memory, Tensor.is_pinned(), Tensor.to(non_blocking=True), torch.cuda.Stream
and Tensor.record_stream); the CUDA tests skip without a GPU. The prefetcher's CPU form
runs everywhere: the probe measures the wait where the prefetcher blocks on the loader.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="hostcheck job's tests run PyTorch jobs")

from tests.support.job_runs import checks_by_id, hostcheck_job, loaders  # noqa: E402

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA GPU on this machine: pinned batches and side-stream copies cannot be made here",
)

PREFETCHER = """
class Prefetcher:
    \"\"\"Loads the next batch while the step runs: on a side CUDA stream when there is
    one (the copy overlaps the step), else on the host.\"\"\"

    def __init__(self, loader, device):
        self.loader, self.device = iter(loader), device
        self.stream = torch.cuda.Stream() if device.type == "cuda" else None
        self.preload()

    def preload(self):
        try:
            self.inputs, self.labels = next(self.loader)
        except StopIteration:
            self.inputs = self.labels = None
            return
        if self.stream is not None:
            with torch.cuda.stream(self.stream):
                self.inputs = self.inputs.to(self.device, non_blocking=True)
                self.labels = self.labels.to(self.device, non_blocking=True)

    def next(self):
        if self.stream is not None:
            torch.cuda.current_stream().wait_stream(self.stream)
            if self.inputs is not None:
                self.inputs.record_stream(torch.cuda.current_stream())
                self.labels.record_stream(torch.cuda.current_stream())
        inputs, labels = self.inputs, self.labels
        self.preload()
        return inputs, labels
"""


def test_prefetcher_wait_is_measured_where_it_blocks(tmp_path):
    """One worker makes a batch of 8 samples in 48 ms, the step takes 24 ms: the prefetcher
    blocks on the loader for about half of each step, one step ahead. The job runs in a
    session of its own with a larger CPU share: the worker's batch is eight sleeps and a
    hand-over, each waiting for a CPU when it ends, so beside busy processes in the same
    session a batch took 114 ms and the wait 0.67 (0.54 isolated, under the same load)."""
    code, document, err = hostcheck_job(
        tmp_path,
        PREFETCHER
        + """
device = torch.device("cpu")
loader = DataLoader(Slow(8 * 16, 0.006), batch_size=8, num_workers=1)
prefetcher = Prefetcher(loader, device)
inputs, labels = prefetcher.next()
while inputs is not None:
    time.sleep(0.024)
    inputs, labels = prefetcher.next()
""",
        isolated=True,
    )
    assert code == 1, err  # about 50 % data-wait: the check fails
    (loader,) = loaders(document)
    assert loader["batches"] == 16
    assert 0.35 <= loader["data_wait_fraction"] <= 0.65
    assert checks_by_id(document)["job-loader1"]["status"] == "fail"


@needs_cuda
def test_pinned_batches_and_side_stream_copies(tmp_path):
    code, document, err = hostcheck_job(
        tmp_path,
        PREFETCHER
        + """
device = torch.device("cuda")
loader = DataLoader(Slow(8 * 16, 0.0005), batch_size=8, num_workers=2, pin_memory=True,
                    persistent_workers=True)
for epoch in range(2):
    prefetcher = Prefetcher(loader, device)
    inputs, labels = prefetcher.next()
    while inputs is not None:
        assert inputs.is_cuda
        torch.cuda._sleep(20_000_000)  # about 10 ms of GPU work
        torch.cuda.synchronize()
        inputs, labels = prefetcher.next()
""",
        "--set",
        "loop.max_data_wait=0.1",
    )
    assert code == 0, err
    (loader,) = loaders(document)
    assert loader["pin_effective"] is True
    assert loader["pinned_batches"] is True
    assert loader["data_wait_fraction"] < 0.1
