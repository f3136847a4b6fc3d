"""The console's tables of a job's DataLoaders: one row per loader of each rank, a rank
column when the job ran ranks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hostcheck.job import host_use
from hostcheck.job.waits import Rules, short_seconds
from hostcheck.report.console import titled_table


def loader_table(
    section: dict,
    title: str,
    columns: Sequence[str],
    cells: Callable[[dict], list[str] | None],
    caption: str,
    *,
    left: Sequence[str] = ("loader",),
    wrapped: Sequence[str] = ("loader",),
):
    """cells(loader) gives a loader's row after the rank, or None to leave it out."""
    ranked = any(entry["rank"] is not None for entry in section["ranks"])
    table = titled_table(title)
    for name in (["rank"] if ranked else []) + list(columns):
        table.add_column(
            name,
            justify="left" if name in left else "right",
            no_wrap=name not in wrapped,
            min_width=10 if name == "loader" else None,
            overflow="fold",
        )
    for entry in section["ranks"]:
        rank = [str(entry["rank"]) if entry["rank"] is not None else "-"] if ranked else []
        for loader in entry["loaders"]:
            row = cells(loader)
            if row is not None:
                table.add_row(*rank, *row)
    table.caption = caption
    table.caption_justify = "left"
    return table


LOADER_COLUMNS = (
    *("loader", "w", "pin", "pf", "pers", "bs"),
    *("batches", "samp/s", "wait", "start", "wcpu", "read/s"),
)


def settings_cells(loader: dict) -> list[str]:
    settings = loader["settings"]
    fraction = loader["data_wait_fraction"]
    return [
        loader["created_at"],
        str(settings["num_workers"]),
        "on" if settings["pin_memory"] else "off",
        "-" if settings["prefetch_factor"] is None else str(settings["prefetch_factor"]),
        "on" if settings["persistent_workers"] else "off",
        "-" if settings["batch_size"] is None else str(settings["batch_size"]),
        str(loader["batches"]),
        "-" if loader["samples_per_s"] is None else f"{loader['samples_per_s']:.0f}",
        "-" if fraction is None else f"{fraction:.1%}",
        f"{loader['startup_s']:.2f}",
        f"{loader['worker_cpu_cores']:.1f}",
        host_use.read_rate_cell(loader),
    ]


def loaders_table(section: dict):
    """Each DataLoader the job iterated: its settings and what it delivered."""
    return loader_table(
        section,
        "DataLoaders the job iterated",
        LOADER_COLUMNS,
        settings_cells,
        "w: num_workers; pf: prefetch_factor; pers: persistent_workers; bs: batch_size; "
        "samp/s: samples/s; wait: time blocked in the iterator's next over step time; start: "
        "seconds waiting for each epoch's first batch; wcpu: cores the workers kept busy; "
        "read/s: bytes the workers read a second (page cache included)",
        left=("loader", "pin", "pers"),
    )


def wait_cells(loader: dict) -> list[str] | None:
    waits = loader["waits"]
    if not waits:
        return None
    worst = max(waits["stalls"], key=lambda s: s["wait_s"], default=None)
    return [
        loader["created_at"],
        str(waits["batches"]),
        *(short_seconds(waits[key]) for key in ("median_s", "p95_s", "worst_s")),
        str(waits["stall_count"]),
        "-"
        if worst is None
        else f"{short_seconds(worst['wait_s'])} at {worst['at_s']:.1f} s, iteration "
        f"{worst['iteration']} batch {worst['batch']}",
    ]


def wait_table(section: dict, rules: Rules):
    """The waits per batch: one row per loader that had steady batches."""
    return loader_table(
        section,
        "Data-wait per batch",
        ["loader", "batches", "median", "p95", "worst", "stalls", "worst stall"],
        wait_cells,
        "time blocked in the iterator's next for each batch after each epoch's first; "
        f"stalls: waits above {rules.stall_factor:g} x the loader's median and above "
        f"{short_seconds(rules.stall_min_wait_s)}; worst stall: when it began, in seconds "
        "from the job's start",
        left=("loader", "worst stall"),
        wrapped=("loader", "worst stall"),
    )
