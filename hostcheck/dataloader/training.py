"""What training code calls: settings() (DataLoader keyword arguments for this rank), load()
and read() (the validated, fresh settings file), fallback() (the rule of thumb without one).
hostcheck.dataloader gives these names."""

from __future__ import annotations

import os
from collections.abc import Mapping

from hostcheck.dataloader.freshness import check_fresh, remeasure
from hostcheck.dataloader.schema import Loader, SettingsFile, SettingsFileError, parse, whole_ranks

DEFAULT_PATH = "/etc/hostcheck/dataloader.json"
ENV_VAR = "HOSTCHECK_DATALOADER"
FALLBACK_MAX_WORKERS = 8  # fallback(): more workers rarely help a loader nobody measured


def resolve(
    path: str | os.PathLike | None = None, env: Mapping[str, str] | None = None
) -> tuple[str, bool]:
    """(the file to read, whether it was named): `path`, else $HOSTCHECK_DATALOADER (empty
    counts as unset), else DEFAULT_PATH (not named: its absence is no error)."""
    if path is not None:
        return os.fspath(path), True
    named = (os.environ if env is None else env).get(ENV_VAR)
    if named:
        return named, True
    return DEFAULT_PATH, False


def read(
    path: str | os.PathLike, *, required: bool = True, max_age_s: float | None = None
) -> SettingsFile | None:
    """The validated, fresh settings file at `path`; None when it does not exist and is not
    `required`; SettingsFileError otherwise."""
    where = os.fspath(path)
    try:
        with open(where, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        if not required:
            return None
        raise SettingsFileError(where, f"no such file: {remeasure(where)}", "absent") from None
    except OSError as exc:
        raise SettingsFileError(where, f"cannot read: {exc.strerror}") from None
    found = parse(raw, where)
    check_fresh(found, max_age_s)
    return found


def load(
    path: str | os.PathLike | None = None, *, max_age_s: float | None = None
) -> SettingsFile | None:
    """The settings file: `path`, else $HOSTCHECK_DATALOADER, else DEFAULT_PATH. None only
    when the default path (nothing named) does not exist; SettingsFileError when the file is
    malformed or stale (another hostname, another number of CPUs, or older than
    max_age_s seconds), or when a named file does not exist."""
    where, named = resolve(path)
    return read(where, required=named, max_age_s=max_age_s)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask): the fallback's budget."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no sched_getaffinity on this platform
        return os.cpu_count() or 1


def local_world_size(env: Mapping[str, str] | None = None) -> int:
    """Ranks on this host: $LOCAL_WORLD_SIZE (torchrun sets it), else 1."""
    value = (os.environ if env is None else env).get("LOCAL_WORLD_SIZE")
    if not value:
        return 1
    try:
        return whole_ranks(int(value), "LOCAL_WORLD_SIZE")
    except ValueError:
        raise ValueError(f"LOCAL_WORLD_SIZE={value!r}: expected an integer >= 1") from None


def fallback(cpus: int, ranks_per_node: int = 1, cuda: bool = False) -> dict:
    """DataLoader keyword arguments when no host was measured: each rank gets
    cpus // ranks_per_node CPUs, keeps one for itself and gives the rest to workers, at most
    8 (num_workers = min(8, cpus // ranks - 1); 0 when a rank has a single CPU or less, as a
    worker would only take that CPU from the training process); pin_memory when CUDA is
    there; prefetch_factor 2 (PyTorch's default) and persistent_workers with workers."""
    ranks = whole_ranks(ranks_per_node, "ranks_per_node")
    budget = cpus // ranks
    workers = 0 if budget <= 1 else min(FALLBACK_MAX_WORKERS, budget - 1)
    return Loader(workers, bool(cuda), 2 if workers else None, workers > 0).kwargs()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def settings(
    ranks_per_node: int | None = None,
    *,
    path: str | os.PathLike | None = None,
    cuda: bool | None = None,
    max_age_s: float | None = None,
) -> dict:
    """Keyword arguments for torch.utils.data.DataLoader for this rank.

    ranks_per_node: the argument, else $LOCAL_WORLD_SIZE (torchrun sets it), else 1. From
    the settings file (load(path, max_age_s=...)), shared again when ranks_per_node differs
    from the ranks it was measured for (SettingsFile.kwargs_for); pin_memory off when
    `cuda` is False. No file at the default path and none named: fallback(usable CPUs,
    ranks, cuda), with cuda None meaning torch.cuda.is_available() (False without torch).
    A malformed or stale file, or a named one that does not exist, raises
    SettingsFileError."""
    if ranks_per_node is None:
        ranks = local_world_size()
    else:
        ranks = whole_ranks(ranks_per_node, "ranks_per_node")
    found = load(path, max_age_s=max_age_s)
    if found is None:
        return fallback(usable_cpus(), ranks, _cuda_available() if cuda is None else cuda)
    kwargs = found.kwargs_for(ranks)
    if cuda is False:
        kwargs["pin_memory"] = False
    return kwargs
