"""The CUDA path of the loop: side-stream prefetcher, pinned copies, events, bandwidth.

It needs a CUDA GPU; without one every test here is skipped and says so. The logic these
share with the CPU path (feeders, measurement, verdicts, overlap arithmetic) is tested in
test_loop_parts.py and test_loop_check.py.
"""

from __future__ import annotations

import pytest
import torch

from hostcheck.loop import measure
from hostcheck.loop.settings import LoopSettings

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA GPU here: the side stream, pinned copies and CUDA events need one",
)


def batches(count: int, pinned: bool):
    for i in range(count):
        images = torch.full((4, 3, 8, 8), i, dtype=torch.uint8)
        labels = torch.full((4,), i, dtype=torch.int64)
        if pinned:
            images, labels = images.pin_memory(), labels.pin_memory()
        yield images, labels


def test_stream_prefetcher_gives_the_same_batches_as_direct_copies():
    from hostcheck.loop.device import CudaDevice

    device = CudaDevice()
    device.prepare(0.001)
    direct = device.feeder(batches(5, pinned=True), prefetch=False)
    streamed = device.feeder(batches(5, pinned=True), prefetch=True)
    for _ in range(5):
        (a, la), (b, lb) = direct.next(), streamed.next()
        assert a.is_cuda and b.is_cuda
        assert torch.equal(a, b) and torch.equal(la, lb)
        expected = (float(la[0]) - torch.tensor([0.485, 0.456, 0.406]) * 255) / (
            torch.tensor([0.229, 0.224, 0.225]) * 255
        )
        assert torch.allclose(b[0, :, 0, 0].cpu(), expected, atol=1e-4)  # normalised on GPU
    with pytest.raises(StopIteration):
        streamed.next()


def test_cuda_step_lasts_about_the_step_time():
    import time

    from hostcheck.loop.device import CudaDevice

    device = CudaDevice()
    device.prepare(0.02)
    images = torch.zeros(4, 3, 8, 8, device=device.torch_device)
    start = time.perf_counter()
    device.step((images, None), 0.02)
    assert 0.01 < time.perf_counter() - start < 0.06


def test_loop_on_cuda_measures_overlap_and_pins():
    result = measure.run(
        LoopSettings(
            device="cuda",
            sample="busy",
            sample_cost_s=0.0005,
            batch_size=16,
            num_workers=2,
            step_time=0.01,
            seconds=1,
        )
    )
    assert result.failure is None
    assert result.pin_applied is True
    assert result.overlap is not None and 0.0 <= result.overlap <= 1.0
    assert result.device.startswith("cuda:")


def test_bandwidth_pinned_beats_pageable_and_knows_the_link():
    from hostcheck.loop import bandwidth

    bw = bandwidth.measure(0, 256 * 2**20, 3)
    assert len(bw.pinned_runs) == 3 and len(bw.pageable_runs) == 3
    assert bw.pinned_bytes_per_s > 1e9
    assert bw.pinned_bytes_per_s > bw.pageable_bytes_per_s
    if bw.link_bytes_per_s is not None:
        assert 0.05 < bw.link_fraction < 1.05
