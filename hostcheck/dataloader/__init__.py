"""Per-host DataLoader settings: what `hostcheck loop --sweep --write PATH` measured, for
training code to use.

    import torch
    from hostcheck import dataloader

    loader = torch.utils.data.DataLoader(
        dataset, batch_size=256, shuffle=True, **dataloader.settings()
    )

`settings()` reads the settings file (the `path` argument, else $HOSTCHECK_DATALOADER, else
/etc/hostcheck/dataloader.json), validates it strictly (hostcheck/dataloader/dataloader-v1.json
describes it), refuses it when it was measured on another host, with another number of usable
CPUs or (with `max_age_s`) too long ago, and returns the DataLoader keyword arguments for this
rank: `num_workers`, `pin_memory` and, with workers, `prefetch_factor` and
`persistent_workers`. Without a file at the default path (and no $HOSTCHECK_DATALOADER) it
returns `fallback()`'s rule of thumb. A bad file raises SettingsFileError, never a silent
fallback. docs/dataloader-settings.md has the rules.

No torch and no jsonschema at import: `hostcheck run` (the dataloader check) and training
code import this package; `settings()` imports torch only to ask whether CUDA is there when no
file exists and `cuda` is not given. Its modules: schema (the file's format), freshness (when
a file no longer stands for the host), training (what training code calls), writing (what
the sweep writes); this module gives their public names.
"""

from hostcheck.dataloader.schema import (
    Host,
    Loader,
    Measured,
    SettingsFile,
    SettingsFileError,
    Workload,
)
from hostcheck.dataloader.training import DEFAULT_PATH, ENV_VAR, fallback, load, read, settings
from hostcheck.dataloader.writing import record, write

__all__ = [
    "DEFAULT_PATH",
    "ENV_VAR",
    "Host",
    "Loader",
    "Measured",
    "SettingsFile",
    "SettingsFileError",
    "Workload",
    "fallback",
    "load",
    "read",
    "record",
    "settings",
    "write",
]
