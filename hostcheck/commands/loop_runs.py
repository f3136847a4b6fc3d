"""The runs behind `hostcheck loop` (hostcheck.commands.loop): the loop once, or swept, with
its progress and what it measured shown, and the sweep's recommendation written as the DataLoader
settings file.

The loop's shape comes from the profile's `loop` section with the command line's flags on
top; the verdict is the `loop` check's (same thresholds, same findings), so `--report`
writes the same documents as `hostcheck run`.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from hostcheck._shared.sizes import format_size, parse_size
from hostcheck.checks import loop as loop_check
from hostcheck.loop import theory
from hostcheck.loop.settings import LoopSettings
from hostcheck.model import CheckResult
from hostcheck.report.console import titled_table


def _model_line(result: Any, settings: LoopSettings) -> str | None:
    """For calibrated samples: what the arithmetic of hostcheck.loop.theory expects."""
    if settings.sample not in ("busy", "sleep") or result.failure is not None:
        return None
    model = theory.predict(
        settings.sample_cost_s,
        settings.batch_size,
        settings.num_workers,
        settings.step_time,
        settings.prefetcher,
    )
    return (
        f"model (cost {settings.sample_cost_s * 1e6:.0f} us/sample): "
        f"{model.samples_per_s:.0f} samples/s, data-wait {model.data_wait_fraction:.1%}; "
        f"measured/model: throughput "
        f"{theory.ratio(result.samples_per_s, model.samples_per_s):.3f}, "
        f"data-wait {result.data_wait_fraction:.1%} vs {model.data_wait_fraction:.1%}"
    )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.1f}/{task.total:.0f}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def run_once(
    settings: LoopSettings,
    section: dict,
    console: Console,
    data: dict,
    bandwidth: bool = True,
) -> tuple[CheckResult, list[str]]:
    from hostcheck.loop import device as loop_device
    from hostcheck.loop import measure

    device = loop_device.device_for(settings.device)
    with _progress(console) as progress:
        task = progress.add_task(f"loop on {device.name}: {settings.label()}", total=1)
        result = measure.Loop(
            settings,
            device=device,
            on_step=lambda i, n: progress.update(task, completed=i / n),
        ).run()
    extra = []
    line = _model_line(result, settings)
    if line:
        extra.append(line)
    bw, note = None, None
    if device.is_cuda and result.failure is None and bandwidth:
        from hostcheck.loop import bandwidth as loop_bandwidth

        bw = loop_bandwidth.measure(
            device.index, parse_size(section["bandwidth_bytes"]), section["bandwidth_repeats"]
        )
    elif not device.is_cuda:
        note = "no CUDA GPU: host-to-device bandwidth not measured"
    return loop_check.assess(result, settings, section, bw, note, data), extra


def sweep_table(rows: list[Any], can_pin: bool) -> Table:
    """One row per configuration; `*` marks the prefetch_factor runs after the grid."""
    table = titled_table("sweep (* prefetch_factor phase)", collapse_padding=False)
    names = ["workers", *(["pin"] if can_pin else []), "pref", "pf", "samples/s", "wait"]
    names += ["step ms", "cpu", "shm", "start-up"]
    widths = {"start-up": 9, "shm": 7, "wait": 6}
    for name in names:
        table.add_column(
            name,
            justify="left" if name in ("pin", "pref") else "right",
            no_wrap=True,
            min_width=max(len(name), widths.get(name, 0)),
        )
    for row in rows:
        startup = row.startup_s
        shown_startup = "/".join(
            f"{startup[k]:.2f}" if k in startup else "-" for k in ("persistent", "not persistent")
        )
        factor = str(row.prefetch_factor) if row.num_workers else "-"
        cells = [str(row.num_workers)]
        if can_pin:
            cells.append("on" if row.pin_memory else "off")
        cells += [
            "on" if row.prefetcher else "off",
            factor + ("*" if row.phase != "grid" else ""),
            "failed" if row.failure else f"{row.samples_per_s:.0f}",
            "" if row.failure else f"{row.data_wait_fraction:.1%}",
            "" if row.failure else f"{row.step_s * 1000:.1f}",
            f"{row.worker_cpu_cores:.2f}",
            format_size(row.shm_peak_bytes).replace(" ", ""),
            shown_startup,
        ]
        table.add_row(*cells)
    table.caption = (
        "pref: prefetcher; pf: prefetch_factor; cpu: cores the workers kept busy; shm: peak "
        "/dev/shm use; start-up: iter() to first batch, persistent/not persistent workers"
        + ("" if can_pin else "; pin_memory: no effect without CUDA")
    )
    table.caption_justify = "left"
    return table


def run_sweep(
    base: LoopSettings,
    section: dict,
    max_workers: int,
    console: Console,
    data: dict,
    plot_path: str | None,
) -> tuple[CheckResult, list[str]]:
    from hostcheck.loop import device as loop_device
    from hostcheck.loop import measure, sweep

    device = loop_device.device_for(base.device)
    results: dict[tuple, Any] = {}
    with _progress(console) as progress:
        task = progress.add_task("sweep", total=1)
        state = {"done": 0}

        def measure_one(settings: LoopSettings) -> Any:
            progress.update(task, description=f"sweep: {settings.label()}")

            def on_step(i: int, n: int) -> None:
                progress.update(task, completed=state["done"] + i / n)

            result = measure.Loop(settings, device=device, on_step=on_step).run()
            results[_key(settings)] = (settings, result)
            return result

        def on_result(settings: LoopSettings, row: Any, done: int, total: int) -> None:
            state["done"] = done
            progress.update(task, completed=done, total=total)

        rows, rec = sweep.run_sweep(
            base,
            max_workers,
            section["sweep_tolerance"],
            measure_one,
            device.can_pin,
            on_result,
        )
    console.print(sweep_table(rows, device.can_pin))
    for row in rows:
        if row.failure:
            console.print(Text(f"failed: workers={row.num_workers}: {row.failure}"))
    lines = []
    data = dict(data)
    data["sweep"] = {
        "rows": [r.to_dict() for r in rows],
        "recommendation": rec.to_dict() if rec else None,
        "max_workers": max_workers,
        "tolerance": section["sweep_tolerance"],
    }
    if rec is None:
        lines.append("no configuration ran to the end: no recommendation")
        failed = next(iter(results.values()))
        return loop_check.assess(failed[1], failed[0], section, None, None, data), lines
    kwargs = ", ".join(f"{k}={v}" for k, v in rec.loader_kwargs().items())
    lines.append(
        f"recommendation: DataLoader({kwargs})" + (", with a prefetcher" if rec.prefetcher else "")
    )
    lines.append(
        f"  {rec.samples_per_s:.0f} samples/s (best {rec.best_samples_per_s:.0f}), data-wait "
        f"{rec.data_wait_fraction:.1%}; /dev/shm needs about {format_size(rec.shm_bytes)} "
        "per rank: shm_size (role shm) at least that times the ranks per host"
    )
    lines += [f"  - {reason}" for reason in rec.reasons]
    sets = [f"loop.{key}={str(value).lower()}" for key, value in rec.loader_kwargs().items()]
    sets.append(f"loop.prefetcher={str(rec.prefetcher).lower()}")
    lines.append(
        "  the loop check of hostcheck run takes it from the profile: "
        + " ".join(f"--set {item}" for item in sets)
    )
    if plot_path:
        from hostcheck.loop import plot

        try:
            plot.write_png(
                rows, plot_path, _plot_title(base, device), rec, device.can_pin, _model(base)
            )
            lines.append(f"plot: {plot_path}")
        except plot.PlotUnavailable as exc:
            lines.append(f"plot: not written: {exc}")
    pin = rec.pin_memory if device.can_pin else base.pin_memory
    chosen_settings, chosen = results.get(
        (rec.num_workers, pin, rec.prefetcher, rec.prefetch_factor),
        next(iter(results.values())),
    )
    bw, note = None, None
    if device.is_cuda:
        from hostcheck.loop import bandwidth as loop_bandwidth

        bw = loop_bandwidth.measure(
            device.index, parse_size(section["bandwidth_bytes"]), section["bandwidth_repeats"]
        )
    else:
        note = "no CUDA GPU: host-to-device bandwidth not measured"
    return loop_check.assess(chosen, chosen_settings, section, bw, note, data), lines


def write_target_problem(path: str) -> str | None:
    """Why `--write PATH` could not be written (checked before the sweep runs), or None.
    Missing folders are made when the file is written."""
    if os.path.isdir(path):
        return "is a directory"
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        return f"{folder} is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"directory {folder} is not writable"
    return None


def plain_loader_recommendation(
    rows: list[dict], overall: dict, tolerance: float, can_pin: bool
) -> dict | None:
    """The recommendation among the rows without a prefetcher: training code gets DataLoader
    arguments, and a DataLoader alone does not prefetch onto the device. Its `prefetcher` is
    true when the sweep's overall choice used one and was faster by more than the tolerance
    (a prefetcher in the training loop would gain that)."""
    from hostcheck.loop import sweep as loop_sweep

    plain = [loop_sweep.Row(**row) for row in rows if not row["prefetcher"]]
    chosen = loop_sweep.recommend(plain, tolerance, can_pin)
    if chosen is None:
        return None
    result = chosen.to_dict()
    result["prefetcher"] = bool(overall["prefetcher"]) and (
        overall["samples_per_s"] > (1 + tolerance) * chosen.samples_per_s
    )
    return result


def write_settings(path: str, check: CheckResult, base: LoopSettings, system: Any) -> str:
    """Write the sweep's recommendation (in the loop check's data) as the DataLoader
    settings file hostcheck.dataloader reads; the line that says so. OSError when the
    file cannot be written."""
    from hostcheck.dataloader import Workload, writing

    sweep = check.data["sweep"]
    if sweep["recommendation"] is None:
        return f"settings: not written to {path}: no recommendation"
    device = check.data["result"]["device"]
    recommendation = plain_loader_recommendation(
        sweep["rows"], sweep["recommendation"], sweep["tolerance"], device.startswith("cuda")
    )
    if recommendation is None:
        return f"settings: not written to {path}: no configuration without a prefetcher ran"
    workload = Workload(
        sample=base.sample,
        sample_cost_us=None if base.sample == "jpeg" else round(base.sample_cost_s * 1e6, 3),
        image_size=base.image_size,
        batch_size=base.batch_size,
        step_time_s=base.step_time,
        ranks_per_node=check.data["ranks"],
        dataset_path=base.dataset_path,
        max_workers=sweep["max_workers"],
    )
    host = writing.this_host(
        check.data["physical_cores"],
        system.total_memory(),
        device if device.startswith("cuda") else "cpu",
    )
    found = writing.record(recommendation, workload, host, sweep["tolerance"], path=path)
    writing.write(path, found)
    kwargs = ", ".join(f"{k}={v}" for k, v in found.dataloader.kwargs().items())
    return f"settings: {path}: DataLoader({kwargs})" + (
        "; a prefetcher in the training loop would be faster still" if found.prefetcher else ""
    )


def _model(base: LoopSettings) -> dict | None:
    """num_workers -> samples/s the arithmetic expects, for calibrated samples."""
    if base.sample == "jpeg":
        return None
    cores = os.cpu_count() if base.sample == "busy" else None
    return {
        workers: theory.predict(
            base.sample_cost_s, base.batch_size, workers, base.step_time, cores=cores
        ).samples_per_s
        for workers in range(0, 65)
    }


def _key(settings: LoopSettings) -> tuple:
    return (
        settings.num_workers,
        settings.pin_memory,
        settings.prefetcher,
        settings.prefetch_factor,
    )


def _plot_title(base: LoopSettings, device: Any) -> str:
    import socket

    what = f"{base.sample} samples"
    if base.sample != "jpeg":
        what += f" ({base.sample_cost_s * 1e6:.0f} us)"
    return (
        f"hostcheck loop --sweep on {socket.gethostname()}: {what}, batch {base.batch_size}, "
        f"step {base.step_time * 1000:.0f} ms, {device.name}"
    )
