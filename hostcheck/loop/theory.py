"""What the loop should measure, from arithmetic alone.

A worker makes a batch of `batch` samples in `cost * batch` seconds; `workers` of them make
`workers / (cost * batch)` batches per second; the training step eats one batch per `step`
seconds. The slower side sets the pace:

    batches/s    = min(workers / (cost * batch), 1 / step)
    data-wait    = max(0, 1 - step * workers / (cost * batch))   of step time

With `num_workers=0` the main process loads each batch itself, between steps:
`1 / (cost * batch + step)`, unless a prefetch thread loads the next batch while the step
runs, which brings it back to `min(1 / (cost * batch), 1 / step)`. `cores` caps the workers
that can run at once when each sample costs CPU (busy work, JPEG decoding): that is the
plateau a sweep finds at the physical core count.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    batches_per_s: float
    samples_per_s: float
    step_s: float  # wall time of one step: waiting for the batch plus compute
    data_wait_s: float
    data_wait_fraction: float  # of step time


def predict(
    cost_s: float,
    batch: int,
    workers: int,
    step_s: float,
    prefetcher: bool = False,
    cores: int | None = None,
) -> Prediction:
    if cost_s < 0 or batch < 1 or workers < 0 or step_s < 0:
        raise ValueError("cost and step must be >= 0, batch >= 1, workers >= 0")
    make = cost_s * batch  # seconds for one process to make one batch
    if workers == 0:
        period = max(make, step_s) if prefetcher else make + step_s
    else:
        parallel = workers if cores is None else min(workers, max(1, cores))
        period = max(make / parallel, step_s)
    if period <= 0:
        raise ValueError("nothing to measure: zero cost and zero step time")
    wait = max(0.0, period - step_s)
    return Prediction(
        batches_per_s=1 / period,
        samples_per_s=batch / period,
        step_s=period,
        data_wait_s=wait,
        data_wait_fraction=wait / period,
    )


def ratio(measured: float, modelled: float) -> float:
    """measured / model; 1.0 when both are zero (no data-wait measured, none modelled)."""
    if modelled == 0:
        return 1.0 if measured == 0 else float("inf")
    return measured / modelled
