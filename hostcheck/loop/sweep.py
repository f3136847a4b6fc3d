"""`hostcheck loop --sweep`: many configurations, one recommendation.

The grid: num_workers from 0 to the physical core count, times pin_memory on/off (only on
CUDA: without it the DataLoader cannot pin) and the prefetcher on/off. Then, at the chosen
num_workers, prefetch_factor 1, 2 and 4. The recommendation: the smallest num_workers whose
throughput is within `tolerance` (5 %) of the best, the pin_memory and prefetcher setting
of that best row, the smallest prefetch_factor within tolerance, persistent_workers when
there are workers (with the start-up it saves per epoch), and the /dev/shm that needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Callable

from hostcheck.loop.settings import LoopSettings

PREFETCH_FACTORS = (1, 2, 4)


@dataclass
class Row:
    """One measured configuration, as the table and the plot show it."""

    num_workers: int
    pin_memory: bool
    prefetcher: bool
    prefetch_factor: int
    samples_per_s: float
    data_wait_fraction: float
    step_s: float
    worker_cpu_cores: float
    shm_peak_bytes: int
    batch_bytes: int
    startup_s: dict
    failure: str | None = None
    phase: str = "grid"  # grid | prefetch_factor

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Recommendation:
    num_workers: int
    pin_memory: bool
    prefetcher: bool
    prefetch_factor: int
    persistent_workers: bool
    samples_per_s: float
    best_samples_per_s: float
    data_wait_fraction: float
    shm_bytes: int  # /dev/shm this setting needs, per rank
    startup_saved_s: float | None  # per epoch, by persistent_workers
    reasons: list[str] = field(default_factory=list)

    def loader_kwargs(self) -> dict:
        kwargs: dict = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
        return kwargs

    def to_dict(self) -> dict:
        data = asdict(self)
        data["dataloader"] = self.loader_kwargs()
        return data


def grid(base: LoopSettings, max_workers: int, can_pin: bool) -> list[LoopSettings]:
    pins = (False, True) if can_pin else (base.pin_memory,)
    configs = []
    for workers in range(0, max_workers + 1):
        for pin in pins:
            for prefetcher in (False, True):
                configs.append(
                    base.replace(num_workers=workers, pin_memory=pin, prefetcher=prefetcher)
                )
    return configs


def row_from(settings: LoopSettings, result: object, phase: str = "grid") -> Row:
    failure = getattr(result, "failure", None)
    return Row(
        num_workers=settings.num_workers,
        pin_memory=settings.pin_memory,
        prefetcher=settings.prefetcher,
        prefetch_factor=settings.prefetch_factor,
        samples_per_s=getattr(result, "samples_per_s", 0.0),
        data_wait_fraction=getattr(result, "data_wait_fraction", 0.0),
        step_s=getattr(result, "step_s", 0.0),
        worker_cpu_cores=getattr(result, "worker_cpu_cores", 0.0),
        shm_peak_bytes=getattr(result, "shm_peak_bytes", 0),
        batch_bytes=getattr(result, "batch_bytes", 0),
        startup_s=dict(getattr(result, "startup_s", {}) or {}),
        failure=failure.message if failure is not None else None,
        phase=phase,
    )


def within(rows: Iterable[Row], tolerance: float) -> list[Row]:
    """Rows whose throughput is within `tolerance` of the best (failed rows never)."""
    ok = [r for r in rows if r.failure is None and r.samples_per_s > 0]
    if not ok:
        return []
    best = max(r.samples_per_s for r in ok)
    return [r for r in ok if r.samples_per_s >= (1 - tolerance) * best]


def choose(rows: list[Row], tolerance: float) -> Row | None:
    """The smallest num_workers within tolerance of the best; among its rows the fastest."""
    close = within([r for r in rows if r.phase == "grid"], tolerance)
    if not close:
        return None
    fewest = min(r.num_workers for r in close)
    return max((r for r in close if r.num_workers == fewest), key=lambda r: r.samples_per_s)


def recommend(rows: list[Row], tolerance: float, can_pin: bool) -> Recommendation | None:
    chosen = choose(rows, tolerance)
    if chosen is None:
        return None
    grid_ok = [r for r in rows if r.phase == "grid" and r.failure is None]
    best = max(r.samples_per_s for r in grid_ok)
    reasons = [
        f"num_workers={chosen.num_workers}: the fewest within {tolerance:.0%} of the best "
        f"throughput in the grid ({chosen.samples_per_s:.0f} of {best:.0f} samples/s)"
    ]
    factor = chosen.prefetch_factor
    same = [
        r
        for r in rows
        if r.num_workers == chosen.num_workers
        and r.pin_memory == chosen.pin_memory
        and r.prefetcher == chosen.prefetcher
    ]
    if chosen.num_workers and len({r.prefetch_factor for r in same}) > 1:
        close = within(same, tolerance)
        if close:
            factor = min(r.prefetch_factor for r in close)
            reasons.append(
                f"prefetch_factor={factor}: the smallest within {tolerance:.0%} at this "
                "num_workers (each unit holds one more batch per worker in /dev/shm)"
            )
    if can_pin:
        reasons.append(f"pin_memory={chosen.pin_memory}: the faster setting measured")
    else:
        reasons.append(
            "pin_memory=True: not measurable without CUDA; on a GPU host pinned batches "
            "copy faster and asynchronously"
        )
    pick = next((r for r in same if r.prefetch_factor == factor), chosen)
    saved = None
    startup = pick.startup_s
    if "persistent" in startup and "not persistent" in startup:
        saved = startup["not persistent"] - startup["persistent"]
    persistent = chosen.num_workers > 0
    if persistent:
        note = f" (measured: {saved:+.3f} s per epoch start)" if saved is not None else ""
        reasons.append(
            "persistent_workers=True: workers are not forked again at every epoch" + note
        )
    shm = max(pick.shm_peak_bytes, chosen.num_workers * factor * pick.batch_bytes)
    return Recommendation(
        num_workers=chosen.num_workers,
        pin_memory=chosen.pin_memory if can_pin else True,
        prefetcher=chosen.prefetcher,
        prefetch_factor=factor,
        persistent_workers=persistent,
        samples_per_s=pick.samples_per_s,
        best_samples_per_s=best,
        data_wait_fraction=pick.data_wait_fraction,
        shm_bytes=shm,
        startup_saved_s=saved,
        reasons=reasons,
    )


def run_sweep(
    base: LoopSettings,
    max_workers: int,
    tolerance: float,
    measure: Callable[[LoopSettings], object],
    can_pin: bool,
    on_result: Callable[[LoopSettings, Row, int, int], None] | None = None,
    prefetch_factors: tuple[int, ...] = PREFETCH_FACTORS,
) -> tuple[list[Row], Recommendation | None]:
    """Measure the grid, then prefetch_factor at the chosen point; `measure` runs one
    configuration (measure.run, or a stand-in in tests)."""
    configs = grid(base, max_workers, can_pin)
    total = len(configs) + len([f for f in prefetch_factors if f != base.prefetch_factor])
    rows: list[Row] = []
    for done, settings in enumerate(configs, start=1):
        row = row_from(settings, measure(settings))
        rows.append(row)
        if on_result:
            on_result(settings, row, done, total)
    chosen = choose(rows, tolerance)
    done = len(configs)
    if chosen is not None and chosen.num_workers > 0:
        for factor in prefetch_factors:
            if factor == base.prefetch_factor:
                continue
            settings = base.replace(
                num_workers=chosen.num_workers,
                pin_memory=chosen.pin_memory,
                prefetcher=chosen.prefetcher,
                prefetch_factor=factor,
            )
            row = row_from(settings, measure(settings), phase="prefetch_factor")
            rows.append(row)
            done += 1
            if on_result:
                on_result(settings, row, done, total)
    return rows, recommend(rows, tolerance, can_pin)
