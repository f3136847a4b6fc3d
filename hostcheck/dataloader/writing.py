"""Writing the DataLoader settings file: `hostcheck loop --sweep --write` records the sweep's
recommendation for this host and writes it atomically."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from hostcheck import __version__
from hostcheck.dataloader.freshness import host_cpus
from hostcheck.dataloader.schema import Host, Loader, Measured, SettingsFile, Workload, parse
from hostcheck.dataloader.training import DEFAULT_PATH


def this_host(physical_cores: int, memory_bytes: int, device: str) -> Host:
    """The Host record of this host as it is now."""
    return Host(os.uname().nodename, host_cpus(), physical_cores, memory_bytes, device)


def record(
    recommendation: Mapping[str, Any],
    workload: Workload,
    host: Host,
    tolerance: float,
    *,
    path: str = DEFAULT_PATH,
    measured_at: str | None = None,
) -> SettingsFile:
    """The settings file for a sweep's recommendation (hostcheck.loop.sweep.Recommendation's
    to_dict(): num_workers, pin_memory, prefetch_factor, persistent_workers, prefetcher,
    samples_per_s, best_samples_per_s, data_wait_fraction, shm_bytes)."""
    workers = recommendation["num_workers"]
    return SettingsFile(
        path=os.fspath(path),
        hostcheck_version=__version__,
        measured_at=measured_at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        host=host,
        workload=workload,
        dataloader=Loader(
            workers,
            bool(recommendation["pin_memory"]),
            recommendation["prefetch_factor"] if workers else None,
            bool(recommendation["persistent_workers"]) and workers > 0,
        ),
        prefetcher=bool(recommendation["prefetcher"]),
        measured=Measured(
            samples_per_s=float(recommendation["samples_per_s"]),
            best_samples_per_s=float(recommendation["best_samples_per_s"]),
            data_wait_fraction=float(recommendation["data_wait_fraction"]),
            shm_bytes_per_rank=int(recommendation["shm_bytes"]),
            tolerance=float(tolerance),
        ),
    )


def write(path: str | os.PathLike, found: SettingsFile) -> SettingsFile:
    """Write `found` to `path` (mode 0644, its folder made when missing) as a reader would
    accept it (validated first): to a temporary file in the same folder, fsync'ed, then
    renamed over `path`, so no reader ever sees half a file. Returns what was written."""
    from hostcheck.atomic import write_atomic

    where = os.fspath(path)
    text = json.dumps(found.to_dict(), indent=2, allow_nan=False) + "\n"
    written = parse(text, where)  # never write what load() would refuse
    os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
    write_atomic(where, text)
    return written
