"""A DataLoader settings file as `hostcheck loop --sweep --write` writes it, and the probe's
reading of a host (the verdict by hostcheck.dataloader's own rules, as the probe asks the
venv's hostcheck), for the unit tests of the hostcheck role's plan and verification."""

from __future__ import annotations

import copy

from hostcheck import dataloader
from hostcheck.dataloader import freshness, schema

PATH = "/etc/hostcheck/dataloader.json"
# The hostcheck_dataloader_* variables as the role's defaults give them, for sample sleep.
VARIABLES = {
    "hostcheck_dataloader_sample": "sleep",
    "hostcheck_dataloader_sample_cost_us": 2000,
    "hostcheck_dataloader_batch_size": 32,
    "hostcheck_dataloader_step_ms": 100,
    "hostcheck_dataloader_ranks_per_node": 0,
    "hostcheck_dataloader_dataset_path": "",
    "hostcheck_dataloader_max_workers": 0,
}
# What the probe reads of node1 for the workload (it has 8 online CPUs)
HOST = {"physical_cores": 4, "gpus": 0}
# What the sweep writes for a sleep workload on node1 (8 usable CPUs, 4 cores, no GPU), made
# by hostcheck.dataloader itself.
SETTINGS = dataloader.record(
    {
        "num_workers": 3,
        "pin_memory": False,
        "prefetch_factor": 2,
        "persistent_workers": True,
        "prefetcher": True,
        "samples_per_s": 310.0,
        "best_samples_per_s": 318.0,
        "data_wait_fraction": 0.01,
        "shm_bytes": 58_000_000,
    },
    dataloader.Workload("sleep", 2000.0, 224, 32, 0.1, 1, None, 4),
    dataloader.Host("node1", 8, 4, 16 * 2**30, "cpu"),
    0.05,
    path=PATH,
    measured_at="2026-01-02T03:04:05Z",
).to_dict()


def settings(**sections) -> dict:
    """SETTINGS with some sections' keys changed: settings(workload={"batch_size": 64})."""
    document = copy.deepcopy(SETTINGS)
    for name, changes in sections.items():
        if isinstance(changes, dict) and isinstance(document.get(name), dict):
            document[name].update(changes)
        else:
            document[name] = changes
    return document


def verdict(document: dict, hostname: str, cpus: int) -> dict:
    """What hostcheck.dataloader says of this document on the host `hostname` with `cpus`
    online CPUs, as the probe returns it."""
    try:
        measured = schema.from_document(document, PATH)
    except dataloader.SettingsFileError as exc:
        return {"state": exc.state, "problem": exc.problem}
    problem = freshness.stale_problem(measured, hostname, cpus)
    return {"state": "stale" if problem else "ok", "problem": problem}


def found(
    document: dict | None = SETTINGS,
    *,
    hostname: str = "node1",
    cpus: int = 8,
    judged: dict | None = None,
    **host,
) -> dict:
    """What the probe returns under `dataloader` for the host `hostname` with `cpus` CPUs
    holding this document; `judged`: the venv's verdict when it is not hostcheck.dataloader's
    on the document (a file that is not JSON, no hostcheck to ask)."""
    return {
        "path": PATH,
        "settings": copy.deepcopy(document),
        "verdict": None if document is None else judged or verdict(document, hostname, cpus),
        "host": {**HOST, **host},
        "dataset_is_dir": None,
    }
