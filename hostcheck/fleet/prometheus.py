"""The fleet read from Prometheus instead of report files: every host whose node_exporter
serves the hostcheck timer's textfile (hostcheck.report.writers.render_prom) becomes the
HostEntry its report file would have made, at one instant (`at`).

A target of a job that serves hostcheck series elsewhere, but none itself, is `no-report`
when it is up and `unreachable` when it is down: the audit's markers for the same cases.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from hostcheck.report.entry import HostEntry
from hostcheck.report.extract import comparable, dataloader_of
from hostcheck.report.writers import HOST_FACTS
from hostcheck.units import format_in

TIMEOUTS = (socket.timeout, TimeoutError)  # one class from Python 3.10 on
DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w|y)$")
SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class PrometheusError(Exception):
    """The server cannot be asked, or has nothing of hostcheck; the message says which."""


@dataclass
class Source:
    url: str  # the server's base URL, e.g. http://prometheus:9090
    timeout: float = 30.0
    selector: str = ""  # label matchers every query is narrowed to, e.g. job="node"

    def query(self, expr: str, at: float) -> list[dict]:
        """The instant vector of `expr` at `at` (Unix seconds): [{metric, value}]."""
        body = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"}).encode()
        request = urllib.request.Request(
            self.url.rstrip("/") + "/api/v1/query",
            data=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"{self.url}: {_server_error(exc)}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TIMEOUTS):
                raise PrometheusError(f"{self.url}: no answer within {self.timeout:g} s") from None
            raise PrometheusError(f"{self.url}: cannot connect: {exc.reason}") from None
        except TIMEOUTS:
            raise PrometheusError(f"{self.url}: no answer within {self.timeout:g} s") from None
        except (OSError, ValueError) as exc:
            raise PrometheusError(f"{self.url}: {exc}") from None
        try:
            answer = json.loads(text)
            if answer["status"] != "success" or answer["data"]["resultType"] != "vector":
                raise ValueError(answer.get("error") or "not an instant vector")
            return answer["data"]["result"]
        except (ValueError, KeyError, TypeError) as exc:
            raise PrometheusError(
                f"{self.url}: not a Prometheus query API answer ({exc})"
            ) from None

    def series(self, metric: str, at: float, condition: str = "") -> list[dict]:
        return self.query(f"{metric}{{{self.selector}}}{condition}", at)


def _server_error(exc: urllib.error.HTTPError) -> str:
    try:
        said = json.loads(exc.read()).get("error")
    except (ValueError, OSError, AttributeError):
        said = None
    return f"HTTP {exc.code}" + (f": {said}" if said else f" {exc.reason}")


def parse_time(text: str, now: float) -> float:
    """Unix seconds from RFC 3339 (2026-11-25T10:00:00Z), Unix seconds, or a duration ago
    as Prometheus writes them (30m, 6h, 1d); ValueError otherwise."""
    found = DURATION.match(text)
    if found:
        return now - int(found[1]) * SECONDS[found[2]]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: RFC 3339, Unix seconds or a duration ago (6h)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


def _target(sample: dict) -> tuple[str, str]:
    labels = sample["metric"]
    return labels.get("job", ""), labels.get("instance", "")


def _number(text: str) -> Any:
    """A sample's value as a report would have it: integral numbers as int."""
    value = float(text)
    if math.isfinite(value) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return comparable(value)


def _text(value: str) -> Any:
    return None if value == "" else value


# What read_entries asks, all at once: the server evaluates one query while this process
# parses the answer of another (10,000 hosts are about a million series).
QUERIES = {
    "hostcheck_info": "",
    "hostcheck_host_info": "",
    "hostcheck_last_run_timestamp_seconds": "",
    "hostcheck_check_status": " == 1",
    "hostcheck_check_problem_info": "",
    "hostcheck_finding_value": "",
    "hostcheck_finding_info": "",
    "hostcheck_dataloader_info": "",
    "up": "",
}


def read_entries(source: Source, at: float, host_label: str = "instance") -> list[HostEntry]:
    """Every host of the jobs that serve hostcheck series, as fleet sees a report file."""
    with ThreadPoolExecutor(len(QUERIES)) as pool:
        asked = {
            metric: pool.submit(source.series, metric, at, condition)
            for metric, condition in QUERIES.items()
        }
        return _entries(
            {metric: answer.result for metric, answer in asked.items()}, source, at, host_label
        )


def _entries(answers: dict, source: Source, at: float, host_label: str) -> list[HostEntry]:
    infos = answers["hostcheck_info"]()
    if not infos:
        where = f" matching {{{source.selector}}}" if source.selector else ""
        raise PrometheusError(
            f"{source.url}: no hostcheck series{where} at "
            f"{dt.datetime.fromtimestamp(at, dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ} "
            "(node_exporter's textfile collector reads hostcheck's .prom file)"
        )
    entries: dict[tuple[str, str], HostEntry] = {}
    names: dict[tuple[str, str], str] = {}
    for sample in infos:
        target = _target(sample)
        labels = sample["metric"]
        entries[target] = HostEntry(
            host="",
            file="",
            profile=labels.get("profile", ""),
            facts={"hostcheck": labels.get("version", "")},
        )
        names[target] = labels.get(host_label) or target[1]
    for sample in answers["hostcheck_host_info"]():
        entry = entries.get(_target(sample))
        if entry is None:
            continue
        labels = sample["metric"]
        entry.hostname = labels.get("hostname", "")
        for fact in HOST_FACTS:
            entry.facts[fact] = _text(labels.get(fact, ""))
        count = entry.facts.get("gpu_count")
        entry.facts["gpu_count"] = int(count) if count and count.isdecimal() else 0
        if host_label in labels:
            names[_target(sample)] = labels[host_label]
    for sample in answers["hostcheck_last_run_timestamp_seconds"]():
        entry = entries.get(_target(sample))
        if entry is not None:
            moment = dt.datetime.fromtimestamp(float(sample["value"][1]), dt.timezone.utc)
            entry.started_at = f"{moment:%Y-%m-%dT%H:%M:%SZ}"
    for sample in answers["hostcheck_check_status"]():
        entry = entries.get(_target(sample))
        if entry is not None:
            entry.checks[sample["metric"]["check"]] = sample["metric"]["status"]
    failing: dict[tuple[str, str], dict[str, list[str]]] = {}
    for sample in answers["hostcheck_check_problem_info"]():
        if _target(sample) in entries:
            labels = sample["metric"]
            by_check = failing.setdefault(_target(sample), {})
            by_check.setdefault(labels["check"], []).append(labels.get("finding", ""))
            if labels.get("finding") and labels.get("status"):
                key = f"{labels['check']}.{labels['finding']}"
                entries[_target(sample)].statuses[key] = labels["status"]
    for sample in answers["hostcheck_finding_value"]():
        entry = entries.get(_target(sample))
        if entry is not None:
            labels = sample["metric"]
            key = f"{labels['check']}.{labels['finding']}"
            entry.values[key] = _number(sample["value"][1])
            if labels.get("unit"):  # shown in its unit, as the report's display shows it
                entry.displays[key] = format_in(entry.values[key], labels["unit"])
    for sample in answers["hostcheck_finding_info"]():
        entry = entries.get(_target(sample))
        if entry is not None:
            labels = sample["metric"]
            value: Any = labels.get("value", "")
            if labels.get("type") == "bool":
                value = value == "true"
            entry.values[f"{labels['check']}.{labels['finding']}"] = value
    for target, by_check in failing.items():
        entry = entries[target]
        for check, findings in by_check.items():
            # the words of the report are not in Prometheus: each failing finding and its value
            shown = [
                f"{name} {entry.shown(f'{check}.{name}')}"
                if f"{check}.{name}" in entry.values
                else name
                for name in findings
                if name
            ]
            entry.problems[check] = "; ".join(shown)
    for sample in answers["hostcheck_dataloader_info"]():
        entry = entries.get(_target(sample))
        if entry is not None:
            entry.dataloader = dataloader_of(_dataloader_settings(sample["metric"]))
    order = _check_order()
    for entry in entries.values():  # a report's order of checks, which fleet's tables keep
        entry.checks = dict(sorted(entry.checks.items(), key=lambda item: order(item[0])))
        entry.problems = {c: entry.problems[c] for c in entry.checks if c in entry.problems}
    return _named(entries, names) + _absent(answers["up"](), set(entries))


def _check_order():
    from hostcheck.registry import CHECKS

    position = {check_id: index for index, check_id in enumerate(CHECKS)}
    return lambda check_id: (position.get(check_id, len(position)), check_id)


def _dataloader_settings(labels: dict) -> dict:
    settings: dict[str, Any] = {"state": labels.get("state")}
    for key in ("num_workers", "prefetch_factor"):
        text = labels.get(key, "")
        settings[key] = int(text) if text.isdecimal() else None
    for key in ("pin_memory", "persistent_workers", "prefetcher"):
        settings[key] = {"true": True, "false": False}.get(labels.get(key, ""))
    return settings


def _named(entries: dict[tuple[str, str], HostEntry], names: dict) -> list[HostEntry]:
    """Each entry under its host name; a name two targets share gets their job too."""
    taken: dict[str, int] = {}
    for name in names.values():
        taken[name] = taken.get(name, 0) + 1
    found = []
    for target, entry in entries.items():
        name = names[target]
        entry.host = name if taken[name] == 1 else f"{name} ({target[0]})"
        entry.file = f"{target[0]}/{target[1]}"
        found.append(entry)
    return found


def _absent(targets: list[dict], reporting: set) -> list[HostEntry]:
    """Targets of the reporting jobs without hostcheck series: no-report when up,
    unreachable when down."""
    jobs = {job for job, _ in reporting}
    found = []
    for sample in targets:
        target = _target(sample)
        if target in reporting or target[0] not in jobs:
            continue
        up = float(sample["value"][1]) == 1
        found.append(
            HostEntry(
                host=target[1],
                file=f"{target[0]}/{target[1]}",
                state="no-report" if up else "unreachable",
                reason=(
                    "node_exporter is up but serves no hostcheck series (is the timer on?)"
                    if up
                    else "Prometheus cannot scrape it (up is 0)"
                ),
            )
        )
    return found
