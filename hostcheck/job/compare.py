"""`hostcheck job --compare OLD.json`: this run beside an earlier one, per loader (matched by
rank and loader index): data-wait, samples/s, the wait per batch, GPU utilization, the
DataLoader settings that changed, and whether the change helped beyond the runs' noise.

The noise is the spread of a loader's throughput over time: the probe keeps its steady
batches' samples and step seconds in windows of about a second; a run's samples/s is the
mean over its windows, with the standard error of that mean. The new run helped when its
samples/s exceeds the old by more than NOISE_FACTOR times the combined standard error, was
worse when it falls short by as much, and is within noise otherwise.
"""

from __future__ import annotations

import json
import math
import statistics

SETTINGS = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers", "batch_size")
NOISE_FACTOR = 2.0
HELPED, WORSE, WITHIN_NOISE, NO_ESTIMATE = "helped", "worse", "within noise", "no noise estimate"


class CompareFileError(Exception):
    """The earlier report cannot be compared with: a usage error naming the file."""


def load(path: str) -> dict:
    """The earlier `hostcheck job --report json:` document at path."""
    try:
        with open(path) as stream:
            document = json.load(stream)
    except FileNotFoundError:
        raise CompareFileError(f"--compare {path}: no such file") from None
    except OSError as exc:
        raise CompareFileError(f"--compare {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CompareFileError(f"--compare {path}: not JSON ({exc})") from None
    job = document.get("job") if isinstance(document, dict) else None
    if not isinstance(job, dict) or not isinstance(job.get("ranks"), list):
        raise CompareFileError(
            f"--compare {path}: not a hostcheck job report (no job.ranks: write one with "
            "hostcheck job --report json:PATH)"
        )
    return document


def throughput(recorded: dict | None) -> dict | None:
    """A loader's `throughput` as the report gives it, from the probe's windows: the mean
    samples/s over the windows and its standard error (None with fewer than two windows)."""
    if not recorded:
        return None
    windows = [(samples, step) for samples, step in recorded["windows"] if step > 0]
    rates = [samples / step for samples, step in windows]
    mean = statistics.fmean(rates) if rates else None
    stderr = statistics.stdev(rates) / math.sqrt(len(rates)) if len(rates) >= 2 else None
    return {
        "window_s": recorded["window_s"],
        "windows": [[samples, step] for samples, step in windows],
        "samples_per_s_mean": None if mean is None else round(mean, 3),
        "samples_per_s_stderr": None if stderr is None else round(stderr, 3),
    }


def verdict(old: dict, new: dict) -> tuple[str, float | None]:
    """(helped / worse / within noise / no noise estimate, the margin in samples/s the
    difference had to exceed) for two loaders' `throughput`."""
    if not old or not new:
        return NO_ESTIMATE, None
    old_se, new_se = old["samples_per_s_stderr"], new["samples_per_s_stderr"]
    if old_se is None or new_se is None:
        return NO_ESTIMATE, None
    margin = NOISE_FACTOR * math.hypot(old_se, new_se)
    change = new["samples_per_s_mean"] - old["samples_per_s_mean"]
    if change > margin:
        return HELPED, round(margin, 3)
    if change < -margin:
        return WORSE, round(margin, 3)
    return WITHIN_NOISE, round(margin, 3)


def _loaders(document: dict) -> dict[tuple, dict]:
    return {
        (entry["rank"], loader["index"]): loader
        for entry in document["job"]["ranks"]
        for loader in entry["loaders"]
    }


def _side(loader: dict) -> dict:
    waits = loader.get("waits") or {}
    flow = loader.get("throughput") or {}
    return {
        "created_at": loader["created_at"],
        "settings": {name: loader["settings"].get(name) for name in SETTINGS},
        "data_wait_fraction": loader.get("data_wait_fraction"),
        "samples_per_s": loader.get("samples_per_s"),
        "samples_per_s_mean": flow.get("samples_per_s_mean"),
        "samples_per_s_stderr": flow.get("samples_per_s_stderr"),
        "windows": len(flow.get("windows", [])),
        "median_wait_s": waits.get("median_s"),
        "p95_wait_s": waits.get("p95_s"),
    }


def _loader_comparison(key: tuple, old: dict | None, new: dict | None) -> dict:
    rank, index = key
    entry = {
        "rank": rank,
        "index": index,
        "old": None if old is None else _side(old),
        "new": None if new is None else _side(new),
        "matched": old is not None and new is not None,
        "note": None,
        "changed": {},
        "verdict": None,
        "noise_margin": None,
    }
    if old is None or new is None:
        entry["note"] = f"only in the {'new' if old is None else 'old'} run"
        return entry
    if old["created_at"] != new["created_at"]:
        entry["note"] = f"created at {old['created_at']} before, {new['created_at']} now"
    entry["changed"] = {
        name: [entry["old"]["settings"][name], entry["new"]["settings"][name]]
        for name in SETTINGS
        if entry["old"]["settings"][name] != entry["new"]["settings"][name]
    }
    entry["verdict"], entry["noise_margin"] = verdict(old.get("throughput"), new.get("throughput"))
    return entry


def _gpus(old: dict, new: dict) -> list[dict]:
    def by_index(document: dict) -> dict:
        gpu = document["job"].get("gpu") or {}
        return {g["index"]: g for g in gpu.get("gpus") or []}

    before, after = by_index(old), by_index(new)
    return [
        {
            "index": index,
            "old_utilization_mean": (before.get(index) or {}).get("utilization_mean"),
            "new_utilization_mean": (after.get(index) or {}).get("utilization_mean"),
        }
        for index in sorted(set(before) | set(after))
    ]


def comparison(old: dict, new: dict, old_path: str) -> dict:
    """The `comparison` part of the job section: the new report against the old one."""
    before, after = _loaders(old), _loaders(new)
    keys = sorted(set(before) | set(after), key=lambda k: (k[0] is None, k[0] or 0, k[1]))
    return {
        "old_report": old_path,
        "old_command": old["job"].get("command"),
        "noise_factor": NOISE_FACTOR,
        "loaders": [_loader_comparison(k, before.get(k), after.get(k)) for k in keys],
        "gpus": _gpus(old, new),
    }


def _number(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def _setting(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "-" if value is None else str(value)


def _rate(side: dict) -> str:
    mean = side["samples_per_s_mean"]
    if mean is None:
        return _number(side["samples_per_s"], ".0f")
    error = side["samples_per_s_stderr"]
    return f"{mean:.0f}" + ("" if error is None else f" ±{error:.1f}")


def _wait(side: dict) -> str:
    median, p95 = side["median_wait_s"], side["p95_wait_s"]
    if median is None:
        return "-"
    return f"{median * 1e3:.1f} / {p95 * 1e3:.1f}"


def table(section: dict):
    """The comparison as a Rich table: old and new side by side, one row a loader."""
    from hostcheck.report.console import titled_table

    result = titled_table(f"Before ({section['old_report']}) and after")
    names = ["rank", "loader", "wait", "samp/s", "ms med/p95", "changed", "verdict"]
    for name in names:
        result.add_column(
            name, justify="left" if name in ("loader", "changed", "verdict") else "right"
        )
    for entry in section["loaders"]:
        old, new = entry["old"], entry["new"]
        rank = "-" if entry["rank"] is None else str(entry["rank"])
        where = (new or old)["created_at"]
        if not entry["matched"]:
            result.add_row(rank, f"{entry['index']} {where}", "", "", "", "", entry["note"])
            continue
        changed = ", ".join(
            f"{name} {_setting(a)} -> {_setting(b)}" for name, (a, b) in entry["changed"].items()
        )
        result.add_row(
            rank,
            f"{entry['index']} {where}" + (f" ({entry['note']})" if entry["note"] else ""),
            f"{_number(old['data_wait_fraction'], '.1%')} -> "
            f"{_number(new['data_wait_fraction'], '.1%')}",
            f"{_rate(old)} -> {_rate(new)}",
            f"{_wait(old)} -> {_wait(new)}",
            changed or "none",
            entry["verdict"]
            + ("" if entry["noise_margin"] is None else f" (noise ±{entry['noise_margin']:.0f}/s)"),
        )
    lines = [
        f"GPU {g['index']} busy {_number(g['old_utilization_mean'], '.0%')} -> "
        f"{_number(g['new_utilization_mean'], '.0%')}"
        for g in section["gpus"]
    ]
    lines.append(
        "wait: data-wait share; samp/s: mean over ~1 s windows ± its standard error; ms "
        "med/p95: wait per batch; helped or worse: samples/s changed by more than "
        f"{section['noise_factor']:g}x the combined standard error"
    )
    result.caption = "; ".join(lines)
    result.caption_justify = "left"
    return result
