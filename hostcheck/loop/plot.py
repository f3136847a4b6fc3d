"""The sweep as a PNG: throughput and data-wait against num_workers (matplotlib, optional:
`pip install hostcheck[plot]`)."""

from __future__ import annotations

from collections.abc import Sequence

from hostcheck.loop.sweep import Recommendation, Row


class PlotUnavailable(RuntimeError):
    pass


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        raise PlotUnavailable(
            f"matplotlib is not installed ({exc}): pip install 'hostcheck[plot]'"
        ) from None
    return pyplot


def series_name(row: Row, can_pin: bool = True) -> str:
    pin = ("on" if row.pin_memory else "off") if can_pin else "n/a (no CUDA)"
    return f"pin_memory {pin}, prefetcher " + ("on" if row.prefetcher else "off")


def write_png(
    rows: Sequence[Row],
    path: str,
    title: str,
    recommendation: Recommendation | None = None,
    can_pin: bool = True,
    model: dict[int, float] | None = None,
) -> None:
    """Throughput (top) and data-wait (bottom) against num_workers, one line per
    pin_memory/prefetcher setting; `model`: num_workers -> samples/s the arithmetic expects
    (without the prefetcher), drawn dashed."""
    plt = _pyplot()
    grid_rows = [r for r in rows if r.phase == "grid" and r.failure is None]
    series: dict[str, list[Row]] = {}
    for row in grid_rows:
        series.setdefault(series_name(row, can_pin), []).append(row)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6.5), dpi=110)
    markers = "osD^v<>"
    for i, (name, points) in enumerate(sorted(series.items())):
        points.sort(key=lambda r: r.num_workers)
        workers = [r.num_workers for r in points]
        top.plot(workers, [r.samples_per_s for r in points], marker=markers[i % 7], label=name)
        bottom.plot(
            workers,
            [100 * r.data_wait_fraction for r in points],
            marker=markers[i % 7],
            label=name,
        )
    all_workers = sorted({r.num_workers for r in grid_rows})
    if model and all_workers:
        shown = [w for w in all_workers if w in model]
        top.plot(
            shown,
            [model[w] for w in shown],
            color="grey",
            linestyle="--",
            linewidth=1,
            label="model: min(w/(c*b), 1/s), w capped at the cores",
        )
    if recommendation is not None:
        top.axvline(recommendation.num_workers, color="grey", linestyle=":", linewidth=1)
        top.annotate(
            f"recommended: num_workers={recommendation.num_workers}",
            (recommendation.num_workers, recommendation.samples_per_s),
            textcoords="offset points",
            xytext=(8, -14),
            fontsize=8,
        )
    bottom.axhline(5, color="red", linestyle="--", linewidth=1, label="5 % alarm")
    top.set_ylabel("samples / s")
    top.set_ylim(bottom=0)
    bottom.set_ylabel("data-wait, % of step time")
    bottom.set_xlabel("num_workers")
    bottom.set_ylim(0, 100)
    if all_workers:
        bottom.set_xticks(all_workers)
    top.legend(fontsize=8)
    bottom.legend(fontsize=8)
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
