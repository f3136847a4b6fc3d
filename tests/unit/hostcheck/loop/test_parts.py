"""The loop's parts one by one: arithmetic, samples, device layer, sweep, verdicts."""

from __future__ import annotations

import io
import os
import subprocess
import time

import psutil
import pytest
import torch

from hostcheck.loop import sweep, theory
from hostcheck.loop.dataset import SyntheticSamples, busy, crop_box, list_files, make_jpeg
from hostcheck.loop.device import CpuDevice, DirectFeeder, ThreadFeeder, overlap_fraction
from hostcheck.loop.settings import LoopSettings
from hostcheck.loop.workers import (
    Failure,
    WorkerTracker,
    classify,
    open_files_needed,
    shm_needed,
)

# ---------------------------------------------------------------- theory


def test_workers_bound_throughput_and_wait():
    p = theory.predict(0.010, 16, 2, 0.050)  # a worker makes a batch in 160 ms
    assert p.batches_per_s == pytest.approx(2 / 0.160)
    assert p.data_wait_fraction == pytest.approx(1 - 0.050 * 2 / 0.160)
    assert p.samples_per_s == pytest.approx(16 * 2 / 0.160)


def test_step_bound_has_no_wait():
    p = theory.predict(0.005, 8, 2, 0.040)
    assert p.batches_per_s == pytest.approx(25.0)
    assert p.data_wait_fraction == 0.0


def test_no_workers_loads_between_steps_unless_a_thread_prefetches():
    serial = theory.predict(0.005, 8, 0, 0.020)
    assert serial.batches_per_s == pytest.approx(1 / (0.040 + 0.020))
    assert serial.data_wait_fraction == pytest.approx(0.040 / 0.060)
    threaded = theory.predict(0.005, 8, 0, 0.020, prefetcher=True)
    assert threaded.batches_per_s == pytest.approx(1 / 0.040)


def test_cores_cap_the_workers():
    assert theory.predict(0.01, 10, 8, 0.0, cores=2).batches_per_s == pytest.approx(20)
    assert theory.predict(0.01, 10, 8, 0.0).batches_per_s == pytest.approx(80)


def test_bad_inputs_and_ratio():
    with pytest.raises(ValueError):
        theory.predict(0.0, 8, 0, 0.0)
    with pytest.raises(ValueError):
        theory.predict(0.01, 0, 1, 0.01)
    assert theory.ratio(0.0, 0.0) == 1.0
    assert theory.ratio(5.0, 4.0) == 1.25


# ---------------------------------------------------------------- samples


def test_jpeg_sample_is_a_cropped_flipped_uint8_image():
    data = SyntheticSamples("jpeg", 10, image_size=96, jpeg=make_jpeg(320, 240))
    image, label = data[3]
    assert image.shape == (3, 96, 96) and image.dtype == torch.uint8
    assert label == 3
    assert 20 < float(image.float().mean()) < 235  # a picture, not a blank
    again, _ = data[3]
    assert torch.equal(image, again)  # the crop is seeded by the index
    assert not torch.equal(image, data[4][0])


def test_crop_box_follows_random_resized_crop():
    import random

    rng = random.Random(1)
    for _ in range(500):
        left, top, right, bottom = crop_box(640, 480, rng)
        w, h = right - left, bottom - top
        assert 0 <= left < right <= 640 and 0 <= top < bottom <= 480
        assert 0.08 * 640 * 480 * 0.9 <= w * h <= 640 * 480
        assert 3 / 4 * 0.95 <= w / h <= 4 / 3 * 1.05 or (w, h) == (480, 480)


def test_busy_sample_burns_its_cpu_time():
    start = time.thread_time()
    busy(0.02)
    spent = time.thread_time() - start
    assert 0.02 <= spent < 0.025


def test_calibrated_samples_are_new_tensors_of_the_asked_shape():
    data = SyntheticSamples("sleep", 4, cost_s=0.001, shape=(2, 5), dtype=torch.float32)
    first, second = data[0][0], data[1][0]
    assert first.shape == (2, 5) and first.dtype == torch.float32
    assert first.data_ptr() != second.data_ptr()
    assert data.sample_bytes() == 2 * 5 * 4 + 8


def test_samples_read_the_dataset_files(tmp_path):
    from PIL import Image

    picture = tmp_path / "a" / "photo.jpg"
    picture.parent.mkdir()
    Image.new("RGB", (300, 200), (200, 30, 30)).save(picture, format="JPEG")
    (tmp_path / "notes.txt").write_text("not an image")
    files = list_files(str(tmp_path))
    assert sorted(os.path.basename(f) for f in files) == ["notes.txt", "photo.jpg"]
    data = SyntheticSamples("jpeg", 4, image_size=32, files=files)
    red = next(data[i][0] for i in range(2) if files[i].endswith(".jpg"))
    assert red[0].float().mean() > 150 and red[1].float().mean() < 80  # decoded from disk
    fallback = next(data[i][0] for i in range(2) if files[i].endswith(".txt"))
    assert fallback.shape == (3, 32, 32)  # not an image: the generated JPEG instead


def test_list_files_samples_at_most_the_limit(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i}").write_bytes(b"x")
    assert len(list_files(str(tmp_path), limit=10)) == 10


# ---------------------------------------------------------------- device layer


def test_cpu_step_waits_without_using_a_core():
    device = CpuDevice()
    wall, cpu = time.perf_counter(), time.process_time()
    device.step(None, 0.05)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert 0.05 <= wall < 0.07
    assert cpu < 0.01


def test_thread_feeder_keeps_order_and_ends():
    feeder = ThreadFeeder(iter(range(20)), lambda x: x * 10)
    got = []
    with pytest.raises(StopIteration):
        while True:
            got.append(feeder.next())
    feeder.close()
    assert got == [x * 10 for x in range(20)]
    assert not feeder.thread.is_alive()


def test_thread_feeder_hands_errors_to_the_loop():
    def broken():
        yield 1
        raise OSError("disk gone")

    feeder = ThreadFeeder(broken(), lambda x: x)
    assert feeder.next() == 1
    with pytest.raises(OSError, match="disk gone"):
        feeder.next()
    feeder.close()


def test_thread_feeder_prepares_the_next_batch_during_the_step():
    def slow():
        for i in range(3):
            time.sleep(0.05)
            yield i

    feeder = ThreadFeeder(slow(), lambda x: x)
    feeder.next()
    time.sleep(0.08)  # the step: the thread loads batch 1 meanwhile
    start = time.perf_counter()
    feeder.next()
    assert time.perf_counter() - start < 0.02
    feeder.close()


def test_direct_feeder_transfers_on_demand():
    feeder = DirectFeeder(iter([1, 2]), lambda x: -x)
    assert [feeder.next(), feeder.next()] == [-1, -2]
    with pytest.raises(StopIteration):
        feeder.next()


def test_overlap_fraction_of_copies_hidden_behind_steps():
    computes = [(0.0, 1.0), (1.0, 2.0), (3.0, 4.0)]
    assert overlap_fraction([(0.2, 0.4), (0.9, 1.1)], computes) == pytest.approx(1.0)
    assert overlap_fraction([(2.0, 3.0)], computes) == 0.0
    assert overlap_fraction([(1.5, 2.5)], computes) == pytest.approx(0.5)
    assert overlap_fraction([], computes) is None


# ---------------------------------------------------------------- verdicts


def test_shm_failures_name_need_and_size():
    enospc = RuntimeError(
        "Caught RuntimeError in DataLoader worker process 0.\nRuntimeError: unable to "
        "allocate shared memory(shm) for file </torch_1_2_0>: No space left on device (28)"
    )
    failure = classify(enospc, "", workers=4, prefetch_factor=2, batch_bytes=100 * 2**20)
    assert failure.kind == "shm"
    assert failure.message.startswith("shm too small: needed about 800.0 MiB, have ")
    sigbus = RuntimeError("DataLoader worker (pid 77) is killed by signal: Bus error. ")
    assert classify(sigbus, "", 1, 2, 0).kind == "shm"


def test_open_file_failures():
    error = RuntimeError("received 0 items of ancdata")
    failure = classify(error, "", 2, 2, 1000, open_files_peak=90, open_files_need=120)
    assert failure.kind == "nofile"
    assert "needed about 120" in failure.message
    from_log = classify(
        RuntimeError("DataLoader timed out after 10 seconds"),
        "OSError: [Errno 24] Too many open files",
        2,
        2,
        1000,
    )
    assert from_log.kind == "nofile"


def test_other_failures():
    assert classify(RuntimeError("DataLoader timed out after 5 seconds"), "", 1, 2, 1).kind == (
        "timeout"
    )
    died = RuntimeError("DataLoader worker (pid(s) 12) exited unexpectedly")
    assert classify(died, "", 1, 2, 1).kind == "worker"
    assert classify(ZeroDivisionError("x"), "", 1, 2, 1) is None
    assert isinstance(classify(died, "", 1, 2, 1), Failure)


def test_resource_estimates():
    assert shm_needed(4, 2, 10) == 80
    assert open_files_needed(10, 0, 2) == 18
    assert open_files_needed(10, 2, 4) == 10 + 12 + 8 + 8


# ---------------------------------------------------------------- sweep


def modelled(settings: LoopSettings) -> object:
    """A stand-in for measure.run: the arithmetic with 2 cores, and pin_memory/prefetcher
    worth a little, so the recommendation logic has something to choose between."""
    from types import SimpleNamespace

    p = theory.predict(
        settings.sample_cost_s,
        settings.batch_size,
        settings.num_workers,
        settings.step_time,
        settings.prefetcher,
        cores=2,
    )
    bonus = (1.02 if settings.pin_memory else 1.0) * (1.01 if settings.prefetcher else 1.0)
    bonus *= 1.0 + 0.001 * settings.prefetch_factor
    batch_bytes = settings.batch_size * 1000
    return SimpleNamespace(
        failure=None,
        samples_per_s=p.samples_per_s * bonus,
        data_wait_fraction=p.data_wait_fraction,
        step_s=p.step_s,
        worker_cpu_cores=min(settings.num_workers, 2),
        shm_peak_bytes=(settings.num_workers * settings.prefetch_factor + 1) * batch_bytes,
        batch_bytes=batch_bytes,
        startup_s={"persistent": 0.05, "not persistent": 0.25} if settings.num_workers else {},
    )


def test_sweep_recommends_the_fewest_workers_near_the_best():
    base = LoopSettings(sample="busy", sample_cost_s=0.004, batch_size=10, step_time=0.02)
    seen = []
    rows, rec = sweep.run_sweep(
        base, 4, 0.05, modelled, can_pin=True, on_result=lambda s, r, d, t: seen.append((d, t))
    )
    assert len([r for r in rows if r.phase == "grid"]) == 5 * 2 * 2
    assert len([r for r in rows if r.phase == "prefetch_factor"]) == 2
    assert seen[-1] == (22, 22)
    # 2 workers make a batch every 20 ms, as fast as the step: more workers do not help
    assert rec.num_workers == 2
    assert rec.pin_memory is True and rec.prefetcher is True
    assert rec.prefetch_factor == 1  # within 5 % and the least /dev/shm
    assert rec.persistent_workers is True
    assert rec.startup_saved_s == pytest.approx(0.20)
    assert rec.shm_bytes == (2 * 1 + 1) * 10_000
    assert rec.loader_kwargs() == {
        "num_workers": 2,
        "pin_memory": True,
        "prefetch_factor": 1,
        "persistent_workers": True,
    }


def test_sweep_without_cuda_does_not_sweep_pin_memory():
    base = LoopSettings(sample="busy", sample_cost_s=0.001, batch_size=10, step_time=0.05)
    rows, rec = sweep.run_sweep(base, 2, 0.05, modelled, can_pin=False)
    assert {r.pin_memory for r in rows} == {True}
    assert rec.num_workers == 0  # one process keeps up with a 50 ms step
    assert rec.persistent_workers is False
    assert any("not measurable without CUDA" in reason for reason in rec.reasons)


def test_failed_rows_never_win():
    rows = [
        sweep.Row(0, False, False, 2, 100.0, 0.5, 0.1, 0.0, 0, 10, {}),
        sweep.Row(1, False, False, 2, 500.0, 0.0, 0.1, 1.0, 0, 10, {}, failure="shm too small"),
    ]
    rec = sweep.recommend(rows, 0.05, can_pin=False)
    assert rec.num_workers == 0
    assert sweep.recommend([rows[1]], 0.05, can_pin=False) is None


def test_plot_is_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from hostcheck.loop import plot

    base = LoopSettings(sample="busy", sample_cost_s=0.004, batch_size=10, step_time=0.02)
    rows, rec = sweep.run_sweep(base, 3, 0.05, modelled, can_pin=True)
    target = tmp_path / "sweep.png"
    plot.write_png(rows, str(target), "test sweep", rec)
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        assert image.size[0] >= 600 and image.size[1] >= 500


def test_the_tracker_is_read_by_one_thread_while_another_adds_workers():
    """The loop's monitor thread lists the living workers while the loop's thread records new
    ones (a CPU snapshot, the reaping): a child that appears during the listing is recorded,
    and the listing neither fails ("dictionary changed size during iteration", as the monitor
    thread did) nor loses what it was reading."""
    tracker = WorkerTracker()
    children: list[subprocess.Popen] = []

    class AppearsWhileListed(psutil.Process):
        def is_running(self) -> bool:
            if not children:  # the loop's thread, between two entries of the listing
                children.append(subprocess.Popen(["sleep", "30"]))
                tracker.refresh()
            return super().is_running()

    first = subprocess.Popen(["sleep", "30"])
    try:
        tracker.refresh()
        tracker.seen[first.pid] = AppearsWhileListed(first.pid)
        listed = tracker.alive()
        assert [proc.pid for proc in listed] == [first.pid]
        assert set(tracker.seen) == {first.pid, children[0].pid}
        assert {proc.pid for proc in tracker.alive()} == {first.pid, *(c.pid for c in children)}
    finally:
        for child in [first, *children]:
            child.kill()
            child.wait()
        tracker.close()
