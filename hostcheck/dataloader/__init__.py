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
code import this module; `settings()` imports torch only to ask whether CUDA is there when no
file exists and `cuda` is not given.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import namedtuple
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

from hostcheck import __version__

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

DEFAULT_PATH = "/etc/hostcheck/dataloader.json"
ENV_VAR = "HOSTCHECK_DATALOADER"
SCHEMA_VERSION = 1
KIND = "hostcheck-dataloader-settings"
ROLE_VARIABLE = "hostcheck_dataloader_enabled"
FALLBACK_MAX_WORKERS = 8  # fallback(): more workers rarely help a loader nobody measured
TIMESTAMP = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z$")


class SettingsFileError(ValueError):
    """A settings file that cannot be used. str() is one line: the file, then what is wrong.
    `state` says which kind: "absent" (a file named explicitly is not there), "malformed"
    (unreadable, not JSON, not this layout) or "stale" (another host, another CPU count,
    too old)."""

    def __init__(self, path: str | os.PathLike, problem: str, state: str = "malformed") -> None:
        self.path = os.fspath(path)
        self.problem = " ".join(problem.splitlines())
        self.state = state
        super().__init__(f"{self.path}: {self.problem}")


def remeasure(path: str) -> str:
    """What makes a stale or missing file right, for messages and remedies."""
    return (
        f"measure again with hostcheck loop --sweep --write {path} (role variable {ROLE_VARIABLE})"
    )


# The sections are named tuples: immutable records, like SettingsFile, that cost a tenth of a
# frozen dataclass to define (every `hostcheck run` imports this module, for its check).


class Host(namedtuple("Host", "hostname cpus physical_cores memory_bytes device")):
    """The host measured: hostname (os.uname().nodename), cpus (online CPUs:
    os.cpu_count()), physical_cores, memory_bytes, device ("cpu" or
    "cuda:0 NAME")."""

    __slots__ = ()


class Workload(
    namedtuple(
        "Workload",
        "sample sample_cost_us image_size batch_size step_time_s ranks_per_node dataset_path "
        "max_workers",
    )
):
    """The synthetic loop the sweep ran: sample (jpeg, busy, sleep), sample_cost_us (busy and
    sleep; None for jpeg), image_size, batch_size, step_time_s, ranks_per_node, dataset_path
    (None: samples made in memory), max_workers."""

    __slots__ = ()


class Loader(namedtuple("Loader", "num_workers pin_memory prefetch_factor persistent_workers")):
    """DataLoader keyword arguments of one rank: num_workers, pin_memory, prefetch_factor
    (None when num_workers is 0), persistent_workers (False when num_workers is 0)."""

    __slots__ = ()

    def kwargs(self) -> dict:
        """As DataLoader takes them: prefetch_factor and persistent_workers only with
        workers (without, DataLoader refuses them)."""
        kwargs: dict = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
        return kwargs


class Measured(
    namedtuple(
        "Measured",
        "samples_per_s best_samples_per_s data_wait_fraction shm_bytes_per_rank tolerance",
    )
):
    """What the recommended setting measured: samples_per_s, best_samples_per_s (of the
    sweep), data_wait_fraction, shm_bytes_per_rank, tolerance."""

    __slots__ = ()


@dataclass(frozen=True)
class SettingsFile:
    """A validated settings file (version 1)."""

    path: str
    hostcheck_version: str
    measured_at: str  # UTC, 2026-11-25T06:00:00Z
    host: Host
    workload: Workload
    dataloader: Loader
    prefetcher: bool
    measured: Measured
    schema_version: int = SCHEMA_VERSION

    def kwargs_for(self, ranks_per_node: int) -> dict:
        """DataLoader keyword arguments for one of `ranks_per_node` ranks on this host.

        The recorded ones when ranks_per_node is the recorded workload.ranks_per_node.
        Otherwise the host's worker budget is shared again: num_workers = recorded
        num_workers x recorded ranks // ranks_per_node, at most host.cpus // ranks_per_node
        (and at least 0); pin_memory as recorded; prefetch_factor and persistent_workers as
        recorded while there are workers, left out when there are none."""
        ranks = _ranks(ranks_per_node, "ranks_per_node")
        recorded, loader = self.workload.ranks_per_node, self.dataloader
        if ranks == recorded:
            return loader.kwargs()
        workers = max(0, min(loader.num_workers * recorded // ranks, self.host.cpus // ranks))
        return Loader(
            workers,
            loader.pin_memory,
            loader.prefetch_factor if workers else None,
            loader.persistent_workers and workers > 0,
        ).kwargs()

    def age_s(self, now: float | None = None) -> float:
        """Seconds since measured_at."""
        return (time.time() if now is None else now) - _epoch(self.measured_at)

    def to_dict(self) -> dict:
        """The file's JSON document."""
        return {
            "schema_version": self.schema_version,
            "kind": KIND,
            "hostcheck_version": self.hostcheck_version,
            "measured_at": self.measured_at,
            "host": self.host._asdict(),
            "workload": self.workload._asdict(),
            "dataloader": self.dataloader._asdict(),
            "prefetcher": self.prefetcher,
            "measured": self.measured._asdict(),
        }


# ------------------------------------------------------------------ validation
# By hand, against the same rules as dataloader-v1.json (the tests keep the two in step):
# the first problem, as "json.path: expected ..., got ...".

Rule = tuple[str, Callable[[Any], bool]]
Refuse = Callable[[str], NoReturn]


def _integer(minimum: int) -> Rule:
    return f"an integer >= {minimum}", lambda v: type(v) is int and v >= minimum


def _number(minimum: float, maximum: float | None = None) -> Rule:
    text = f"a number >= {minimum}" if maximum is None else f"a number from {minimum} to {maximum}"
    return (
        text,
        lambda v: (
            type(v) in (int, float)
            and math.isfinite(v)
            and v >= minimum
            and (maximum is None or v <= maximum)
        ),
    )


def _nullable(rule: Rule) -> Rule:
    text, test = rule
    return f"{text} or null", lambda v: v is None or test(v)


def _one_of(*values: str) -> Rule:
    return f"one of {', '.join(values)}", lambda v: isinstance(v, str) and v in values


STRING: Rule = ("a non-empty string", lambda v: isinstance(v, str) and v != "")
BOOLEAN: Rule = ("true or false", lambda v: type(v) is bool)
TIME: Rule = ("a UTC time like 2026-11-25T06:00:00Z", lambda v: _epoch(v) is not None)

TOP: dict[str, Rule] = {
    "hostcheck_version": STRING,
    "measured_at": TIME,
    "prefetcher": BOOLEAN,
}
SECTIONS: dict[str, tuple[type, dict[str, Rule]]] = {
    "host": (
        Host,
        {
            "hostname": STRING,
            "cpus": _integer(1),
            "physical_cores": _integer(1),
            "memory_bytes": _integer(0),
            "device": STRING,
        },
    ),
    "workload": (
        Workload,
        {
            "sample": _one_of("jpeg", "busy", "sleep"),
            "sample_cost_us": _nullable(_number(0)),
            "image_size": _integer(1),
            "batch_size": _integer(1),
            "step_time_s": _number(0),
            "ranks_per_node": _integer(1),
            "dataset_path": _nullable(STRING),
            "max_workers": _integer(0),
        },
    ),
    "dataloader": (
        Loader,
        {
            "num_workers": _integer(0),
            "pin_memory": BOOLEAN,
            "prefetch_factor": _nullable(_integer(1)),
            "persistent_workers": BOOLEAN,
        },
    ),
    "measured": (
        Measured,
        {
            "samples_per_s": _number(0),
            "best_samples_per_s": _number(0),
            "data_wait_fraction": _number(0, 1),
            "shm_bytes_per_rank": _integer(0),
            "tolerance": _number(0, 1),
        },
    ),
}
KEYS = ("schema_version", "kind", "hostcheck_version", "measured_at", "host", "workload")
KEYS += ("dataloader", "prefetcher", "measured")


def _epoch(text: object) -> float | None:
    match = TIMESTAMP.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    import datetime as dt

    try:
        moment = dt.datetime(*map(int, match.groups()), tzinfo=dt.timezone.utc)
    except ValueError:  # 2026-13-45T...
        return None
    return moment.timestamp()


def _shown(value: object) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return _shown(value)


def _check_keys(where: str, document: dict, keys: Any, problem: Refuse) -> None:
    for key in document:
        if key not in keys:
            problem(f"{where}{key}: unknown key")
    for key in keys:
        if key not in document:
            problem(f"{where}{key}: missing")


def _check_rules(where: str, document: dict, rules: dict, problem: Refuse) -> None:
    for key, (text, test) in rules.items():
        if not test(document[key]):
            problem(f"{where}{key}: expected {text}, got {_shown(document[key])}")


def from_document(document: object, path: str) -> SettingsFile:
    """The settings file a parsed JSON document stands for; SettingsFileError naming the
    first problem (its JSON path) when it does not follow version 1 strictly."""

    def problem(text: str) -> NoReturn:
        raise SettingsFileError(path, text)

    if not isinstance(document, dict):
        problem(f"expected a JSON object, got {_kind(document)}")
    version = document.get("schema_version")
    if "schema_version" not in document:
        problem("schema_version: missing")
    if type(version) is not int or version != SCHEMA_VERSION:
        problem(
            f"schema_version {_shown(version)} is not supported "
            f"(this hostcheck reads version {SCHEMA_VERSION})"
        )
    _check_keys("", document, KEYS, problem)
    if document["kind"] != KIND:
        problem(f"kind: expected {_shown(KIND)}, got {_shown(document['kind'])}")
    _check_rules("", document, TOP, problem)
    parts = {}
    for name, (cls, rules) in SECTIONS.items():
        section = document[name]
        if not isinstance(section, dict):
            problem(f"{name}: expected an object, got {_kind(section)}")
        _check_keys(f"{name}.", section, rules, problem)
        _check_rules(f"{name}.", section, rules, problem)
        parts[name] = cls(**section)
    loader = parts["dataloader"]
    if loader.num_workers == 0:
        if loader.prefetch_factor is not None:
            problem(
                "dataloader.prefetch_factor: expected null when num_workers is 0, got "
                f"{_shown(loader.prefetch_factor)}"
            )
        if loader.persistent_workers:
            problem("dataloader.persistent_workers: expected false when num_workers is 0, got true")
    elif loader.prefetch_factor is None:
        problem(
            "dataloader.prefetch_factor: expected an integer >= 1 when num_workers is "
            f"{loader.num_workers}, got null"
        )
    return SettingsFile(
        path=path,
        hostcheck_version=document["hostcheck_version"],
        measured_at=document["measured_at"],
        prefetcher=document["prefetcher"],
        **parts,
    )


def parse(raw: bytes | str, path: str) -> SettingsFile:
    """A settings file from its bytes (see from_document)."""

    def pairs(items: list[tuple[str, Any]]) -> dict:
        document: dict = {}
        for key, value in items:
            if key in document:
                raise SettingsFileError(path, f"key {_shown(key)} appears twice in one object")
            document[key] = value
        return document

    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        document = json.loads(text, object_pairs_hook=pairs)
    except UnicodeDecodeError:
        raise SettingsFileError(path, "not valid JSON: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return from_document(document, path)


# ------------------------------------------------------------------ reading


def host_cpus() -> int:
    """The host's online CPUs, as the file records them: not this process's affinity, which
    a launcher narrows per rank (srun --cpu-bind, numactl, a cpuset) without the host
    changing."""
    return os.cpu_count() or 1


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask): the fallback's budget."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no sched_getaffinity on this platform
        return os.cpu_count() or 1


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds:.0f} s"


def check_fresh(found: SettingsFile, max_age_s: float | None = None) -> None:
    """SettingsFileError (state "stale") when `found` was measured on another host, with
    another number of CPUs, or more than max_age_s seconds ago."""
    host, cpus = os.uname().nodename, host_cpus()
    if (found.host.hostname, found.host.cpus) != (host, cpus):
        raise SettingsFileError(
            found.path,
            f"stale: measured on {found.host.hostname} with {found.host.cpus} CPUs, this is "
            f"{host} with {cpus} CPUs: {remeasure(found.path)}",
            "stale",
        )
    if max_age_s is not None and found.age_s() > max_age_s:
        raise SettingsFileError(
            found.path,
            f"stale: measured at {found.measured_at}, {_duration(found.age_s())} ago, more "
            f"than the {_duration(max_age_s)} allowed: {remeasure(found.path)}",
            "stale",
        )


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


# ------------------------------------------------------------------ for training code


def _ranks(value: object, name: str) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    return value


def local_world_size(env: Mapping[str, str] | None = None) -> int:
    """Ranks on this host: $LOCAL_WORLD_SIZE (torchrun sets it), else 1."""
    value = (os.environ if env is None else env).get("LOCAL_WORLD_SIZE")
    if not value:
        return 1
    try:
        return _ranks(int(value), "LOCAL_WORLD_SIZE")
    except ValueError:
        raise ValueError(f"LOCAL_WORLD_SIZE={value!r}: expected an integer >= 1") from None


def fallback(cpus: int, ranks_per_node: int = 1, cuda: bool = False) -> dict:
    """DataLoader keyword arguments when no host was measured: each rank gets
    cpus // ranks_per_node CPUs, keeps one for itself and gives the rest to workers, at most
    8 (num_workers = min(8, cpus // ranks - 1); 0 when a rank has a single CPU or less, as a
    worker would only take that CPU from the training process); pin_memory when CUDA is
    there; prefetch_factor 2 (PyTorch's default) and persistent_workers with workers."""
    ranks = _ranks(ranks_per_node, "ranks_per_node")
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
        ranks = _ranks(ranks_per_node, "ranks_per_node")
    found = load(path, max_age_s=max_age_s)
    if found is None:
        return fallback(usable_cpus(), ranks, _cuda_available() if cuda is None else cuda)
    kwargs = found.kwargs_for(ranks)
    if cuda is False:
        kwargs["pin_memory"] = False
    return kwargs


# ------------------------------------------------------------------ writing


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
