"""Report formats: JSON, JUnit XML, Prometheus textfile. Each renders the report document."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any, Callable

from hostcheck.atomic import write_atomic
from hostcheck.remedies import role_variables

FORMATS = ("json", "junit", "prom")


class ReportSpecError(ValueError):
    pass


def parse_report_spec(text: str, formats: Sequence[str] = FORMATS) -> tuple[str, str]:
    """`json:PATH` -> ("json", PATH); PATH "-" is standard output."""
    kind, sep, path = text.partition(":")
    if not sep or kind not in formats or not path:
        raise ReportSpecError(
            f"--report {text}: expected FORMAT:PATH with FORMAT one of {', '.join(formats)} "
            "and PATH a file or - for standard output"
        )
    return kind, path


def json_safe(value: Any) -> Any:
    """JSON has no infinity: unlimited limits become the string 'unlimited'."""
    if isinstance(value, float):
        if math.isinf(value):
            return "unlimited" if value > 0 else "-unlimited"
        if math.isnan(value):
            return None
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def render_json(document: dict) -> str:
    return json.dumps(json_safe(document), indent=2, sort_keys=False, allow_nan=False) + "\n"


def render_junit(document: dict, fail_on_warn: bool = False) -> str:
    checks = document["checks"]
    host = document["host"]["hostname"]
    failures = sum(
        c["status"] == "fail" or (fail_on_warn and c["status"] == "warn") for c in checks
    )
    suite = ET.Element(
        "testsuite",
        name="hostcheck",
        hostname=host,
        timestamp=document["started_at"],
        tests=str(len(checks)),
        failures=str(failures),
        errors=str(sum(c["status"] == "error" for c in checks)),
        skipped=str(sum(c["status"] == "skip" for c in checks)),
        time=f"{document['duration_s']:.3f}",
    )
    for check in checks:
        detail = "\n".join(
            f"{f['status']:5} {f['name']}: {f['display'] or f['measured']}"
            + (f" (expected {f['expected']})" if f["expected"] not in (None, "") else "")
            for f in check["findings"]
        )
        message = check["summary"] + (f" | remedy: {check['remedy']}" if check["remedy"] else "")
        junit_case(
            suite,
            f"hostcheck.{host}",
            check["id"],
            check["status"],
            message,
            skip_message=check["summary"],
            detail=detail,
            seconds=check["duration_s"],
            fail_on_warn=fail_on_warn,
        )
    return junit_text(suite)


# Characters XML 1.0 cannot carry, even escaped (reports are untrusted input).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_case(
    parent: ET.Element,
    classname: str,
    name: str,
    status: str,
    message: str,
    skip_message: str = "",
    detail: str = "",
    seconds: float = 0.0,
    fail_on_warn: bool = False,
) -> ET.Element:
    """One <testcase>: failure for fail (and warn under fail_on_warn), error, skipped."""
    case = ET.SubElement(
        parent,
        "testcase",
        classname=xml_safe(classname),
        name=xml_safe(name),
        time=f"{seconds:.3f}",
    )
    message, detail = xml_safe(message), xml_safe(detail)
    if status == "fail" or (fail_on_warn and status == "warn"):
        ET.SubElement(case, "failure", message=message, type=status).text = detail
    elif status == "error":
        ET.SubElement(case, "error", message=message).text = detail
    elif status == "skip":
        ET.SubElement(case, "skipped", message=xml_safe(skip_message))
    if detail:
        ET.SubElement(case, "system-out").text = detail
    return case


def junit_text(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def prom_label(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def prom_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value) if not value.is_integer() else str(int(value))


def render_prom(document: dict) -> str:
    """node_exporter textfile collector format."""
    statuses = ("pass", "warn", "fail", "skip", "error")
    lines = [
        "# HELP hostcheck_info hostcheck version and profile of the last run.",
        "# TYPE hostcheck_info gauge",
        f'hostcheck_info{{version="{prom_label(document["tool"]["version"])}",'
        f'profile="{prom_label(document["profile"]["name"])}"}} 1',
        "# HELP hostcheck_last_run_timestamp_seconds When the last run started.",
        "# TYPE hostcheck_last_run_timestamp_seconds gauge",
        f"hostcheck_last_run_timestamp_seconds {_epoch(document['started_at'])}",
        "# HELP hostcheck_run_duration_seconds How long the last run took.",
        "# TYPE hostcheck_run_duration_seconds gauge",
        f"hostcheck_run_duration_seconds {document['duration_s']}",
        "# HELP hostcheck_exit_code Exit code of the last run (0 ok, 1 failed, 2 not assessed).",
        "# TYPE hostcheck_exit_code gauge",
        f"hostcheck_exit_code {document['exit_code']}",
        "# HELP hostcheck_check_status 1 for the status each check had in the last run.",
        "# TYPE hostcheck_check_status gauge",
    ]
    for check in document["checks"]:
        for status in statuses:
            lines.append(
                f'hostcheck_check_status{{check="{prom_label(check["id"])}",status="{status}"}} '
                f"{int(check['status'] == status)}"
            )
    remedied = [
        (check["id"], variables)
        for check in document["checks"]
        if check["status"] in ("fail", "warn", "error")
        and (variables := role_variables(check.get("remedy") or ""))
    ]
    if remedied:
        lines += [
            "# HELP hostcheck_check_remedy_info The Ansible variables that fix a check that did "
            "not pass.",
            "# TYPE hostcheck_check_remedy_info gauge",
        ]
        lines += [
            f'hostcheck_check_remedy_info{{check="{prom_label(check_id)}",'
            f'variables="{prom_label(",".join(variables))}"}} 1'
            for check_id, variables in remedied
        ]
    lines += _fleet_lines(document)
    lines += _loop_lines(document)
    lines += _gpu_lines(document)
    interval = (document.get("schedule") or {}).get("interval_s")
    if interval:
        lines += [
            "# HELP hostcheck_run_interval_seconds How often this run repeats (its timer's "
            "schedule): the staleness alert's window is twice this.",
            "# TYPE hostcheck_run_interval_seconds gauge",
            f"hostcheck_run_interval_seconds {prom_value(float(interval))}",
        ]
    lines += [
        "# HELP hostcheck_finding_value Numeric value a check measured (unit: bytes, ratio or "
        "bytes_per_second where it has one).",
        "# TYPE hostcheck_finding_value gauge",
    ]
    for check in document["checks"]:
        for finding in check["findings"]:
            number = _number(finding["measured"])
            if number is None or math.isnan(number):
                continue
            unit = finding.get("unit")
            lines.append(
                f'hostcheck_finding_value{{check="{prom_label(check["id"])}",'
                f'finding="{prom_label(finding["name"])}"'
                + (f',unit="{prom_label(unit)}"' if unit else "")
                + f"}} {prom_value(number)}"
            )
    return "\n".join(lines) + "\n"


# What `hostcheck fleet --prometheus` reads besides the statuses and numbers: the host's
# facts, why a check did not pass, the findings that are not numbers, the DataLoader settings.
HOST_FACTS = (
    "os",
    "kernel",
    "cpu_model",
    "gpu_model",
    "gpu_count",
    "driver",
    "cuda_driver",
    "torch",
    "pillow",
)


def _labels(pairs: dict[str, Any]) -> str:
    return ",".join(
        f'{name}="{prom_label("" if value is None else _label_text(value))}"'
        for name, value in pairs.items()
    )


def _label_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _fleet_lines(document: dict) -> list[str]:
    """The report as `hostcheck fleet` boils it down (hostcheck.report.extract), as info series:
    a fleet read from Prometheus sees what a fleet of report files sees."""
    from hostcheck.report.extract import from_report

    entry = from_report(document, "", "")
    facts = {"hostname": entry.hostname, **{fact: entry.facts.get(fact) for fact in HOST_FACTS}}
    lines = [
        "# HELP hostcheck_host_info What the last run found the host to be (fleet groups hosts "
        "of the same hardware by it).",
        "# TYPE hostcheck_host_info gauge",
        f"hostcheck_host_info{{{_labels(facts)}}} 1",
    ]
    problems = _problems(document)
    if problems:
        # no words in labels: a summary holds measured values, and each new one would be a new
        # series; the report file (and `hostcheck show`) says why in words
        lines += [
            "# HELP hostcheck_check_problem_info A finding that did not pass, with its status "
            "(finding is empty for a check that failed as a whole or was skipped).",
            "# TYPE hostcheck_check_problem_info gauge",
        ]
        lines += [f"hostcheck_check_problem_info{{{_labels(labels)}}} 1" for labels in problems]
    texts = {
        key: value
        for key, value in entry.values.items()
        if isinstance(value, (bool, str)) and not key.endswith("'")
    }
    if texts:
        lines += [
            "# HELP hostcheck_finding_info A finding whose value is not a number: text, or "
            "true/false (type bool).",
            "# TYPE hostcheck_finding_info gauge",
        ]
        for key, value in texts.items():
            check, finding = key.split(".", 1)
            kind = "bool" if isinstance(value, bool) else "text"
            pairs = {"check": check, "finding": finding, "type": kind, "value": value}
            lines.append(f"hostcheck_finding_info{{{_labels(pairs)}}} 1")
    if entry.dataloader:
        lines += [
            "# HELP hostcheck_dataloader_info The state of the host's DataLoader settings file "
            "and the settings it recommends.",
            "# TYPE hostcheck_dataloader_info gauge",
            f"hostcheck_dataloader_info{{{_labels(entry.dataloader)}}} 1",
        ]
    return lines


def _problems(document: dict) -> list[dict[str, str]]:
    found = []
    for check in document["checks"]:
        if check["status"] == "pass":
            continue
        bad = [f for f in check["findings"] if f["status"] in ("warn", "fail", "error")]
        if not bad:
            found.append({"check": check["id"], "finding": "", "status": check["status"]})
        found += [{"check": check["id"], "finding": f["name"], "status": f["status"]} for f in bad]
    return found


def _gpu_lines(document: dict) -> list[str]:
    """The GPU faults, per GPU and kind, as numbers: counts since boot and 0/1 states."""
    gpu = next((c for c in document["checks"] if c["id"] == "gpu"), None)
    data = (gpu or {}).get("data") or {}
    series: dict[str, list[str]] = {}

    def add(metric: str, labels: dict, value: float) -> None:
        series.setdefault(metric, []).append(f"{metric}{{{_labels(labels)}}} {prom_value(value)}")

    index_of = {}
    for each in data.get("gpus") or []:
        if not isinstance(each, dict) or each.get("bus_id") is None:
            continue
        where = {"gpu": str(each["index"]), "bus_id": each["bus_id"]}
        index_of[each["bus_id"]] = str(each["index"])
        repair = each.get("memory_repair") or {}
        rows = repair.get("remapped_rows")
        if rows:
            add("hostcheck_gpu_row_remap_pending", where, float(rows["pending"]))
            add("hostcheck_gpu_row_remap_failed", where, float(rows["failed"]))
            for cause in ("corrected", "uncorrected"):
                add("hostcheck_gpu_remapped_rows", {**where, "cause": cause}, float(rows[cause]))
        pages = repair.get("retired_pages")
        if pages:
            add("hostcheck_gpu_retired_pages_pending", where, float(pages["pending"]))
            for cause in ("single_bit", "double_bit"):
                add("hostcheck_gpu_retired_pages", {**where, "cause": cause}, float(pages[cause]))
        links = each.get("nvlinks")
        if links:
            for state, count in (("up", sum(links)), ("down", len(links) - sum(links))):
                add("hostcheck_gpu_nvlinks", {**where, "state": state}, float(count))
    for event in ((data.get("events") or {}).get("events") or {}).values():
        labels = {
            "gpu": index_of.get(event["bus_id"], ""),
            "bus_id": event["bus_id"],
            "kind": event["kind"],
            "code": str(event["code"]),
        }
        add("hostcheck_gpu_events", labels, float(event["count"]))
    helps = {
        "hostcheck_gpu_row_remap_pending": "1 while a remapped row waits for a GPU reset.",
        "hostcheck_gpu_row_remap_failed": "1 once a row could not be remapped (replace the GPU).",
        "hostcheck_gpu_remapped_rows": "Rows remapped, by the kind of error that caused it.",
        "hostcheck_gpu_retired_pages_pending": "1 while a retired page waits for a GPU reset.",
        "hostcheck_gpu_retired_pages": "Pages retired, by cause (GPUs before Ampere).",
        "hostcheck_gpu_nvlinks": "NVLinks of the GPU up and down.",
        "hostcheck_gpu_events": "Xid (GPU) and SXid (NVSwitch) events since boot, by code.",
    }
    lines: list[str] = []
    for metric, samples in series.items():
        lines += [f"# HELP {metric} {helps[metric]}", f"# TYPE {metric} gauge", *samples]
    return lines


def _loop_lines(document: dict) -> list[str]:
    """The loop's data-wait and the profile's limit for it, when the loop measured one."""
    loop = next((c for c in document["checks"] if c["id"] == "loop"), None)
    wait = next(
        (f["measured"] for f in (loop or {}).get("findings", []) if f["name"] == "data-wait"),
        None,
    )
    if _number(wait) is None:
        return []
    limit = document["profile"]["values"]["checks"]["loop"]["max_data_wait"]
    return [
        "# HELP hostcheck_loop_data_wait_ratio Share of the synthetic loop's step time spent "
        "waiting for the next batch.",
        "# TYPE hostcheck_loop_data_wait_ratio gauge",
        f"hostcheck_loop_data_wait_ratio {prom_value(float(wait))}",
        "# HELP hostcheck_loop_data_wait_threshold_ratio The profile's limit for it "
        "(loop.max_data_wait).",
        "# TYPE hostcheck_loop_data_wait_threshold_ratio gauge",
        f"hostcheck_loop_data_wait_threshold_ratio {prom_value(float(limit))}",
    ]


def _epoch(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


RENDERERS: dict[str, Callable[..., str]] = {
    "json": render_json,
    "junit": render_junit,
    "prom": render_prom,
}


def write_report(kind: str, path: str, document: dict, fail_on_warn: bool = False) -> None:
    text = render_junit(document, fail_on_warn) if kind == "junit" else RENDERERS[kind](document)
    write_report_text(path, text)


def write_report_text(path: str, text: str) -> None:
    """To standard output for `-`, else atomically to the file."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_atomic(path, text)
