"""The DataLoader settings file's format, version 1 (dataloader-v1.json beside this module
describes it): its records, and validation by hand against the same rules (the tests keep the
two in step), naming the first problem as "json.path: expected ..., got ..."."""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

SCHEMA_VERSION = 1
KIND = "hostcheck-dataloader-settings"
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
        ranks = whole_ranks(ranks_per_node, "ranks_per_node")
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


def whole_ranks(value: object, name: str) -> int:
    """`value` when it is a number of ranks (an integer >= 1), else ValueError naming `name`."""
    if type(value) is not int or value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    return value


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
