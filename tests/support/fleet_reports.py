"""Reports for the fleet tests: copies of one real `hostcheck run --profile quick` report of
this machine (made once per session by the `real_report` fixture), mutated."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

MARKER = "hostcheck-audit-marker"


def check(doc: dict, check_id: str) -> dict:
    return next(c for c in doc["checks"] if c["id"] == check_id)


def finding(doc: dict, check_id: str, name: str, measured: Any, status: str = "pass") -> dict:
    """Set a finding's measured value, adding the finding (shaped as the check's first
    one) when the quick profile did not produce it."""
    target = check(doc, check_id)
    for item in target["findings"]:
        if item["name"] == name:
            item.update(measured=measured, status=status, display="")
            return doc
    shape = copy.deepcopy(check(doc, "shm")["findings"][0])
    shape.update(name=name, measured=measured, status=status, display="", expected="")
    target["findings"].append(shape)
    return doc


def status(doc: dict, check_id: str, value: str, summary: str = "") -> dict:
    target = check(doc, check_id)
    target["status"] = value
    if summary:
        target["summary"] = summary
    return doc


def hardware(doc: dict, gpu: str | None, count: int, cpu: str) -> dict:
    check(doc, "cpu")["data"]["model"] = cpu
    gpu_data = check(doc, "gpu")["data"]
    gpu_data["gpus"] = [{"index": i, "name": gpu} for i in range(count)] if gpu else []
    return doc


def host(base: dict, name: str, **changes: Any) -> dict:
    """A copy of the real report for host `name`: throughput and data-wait set (loop=...),
    hardware (hw=(gpu, count, cpu)), statuses (fail=[ids])."""
    doc = copy.deepcopy(base)
    doc["host"]["hostname"] = name
    for check_id in doc["checks"]:
        check_id["status"] = "pass" if check_id["status"] != "skip" else "skip"
    hardware(doc, *changes.get("hw", ("NVIDIA H100 80GB HBM3", 8, "AMD EPYC 9654")))
    status(doc, "loop", "pass")  # the quick profile skips the loop; these hosts ran it
    throughput, wait = changes.get("loop", (1000.0, 0.01))
    finding(doc, "loop", "throughput", throughput)
    finding(doc, "loop", "data-wait", wait)
    for check_id in changes.get("fail", ()):
        status(doc, check_id, "fail", f"{check_id} is broken")
    return doc


def write(folder: Path, name: str, doc: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def marker(name: str, state: str = "unreachable", reason: str = "ssh: No route to host") -> dict:
    return {"kind": MARKER, "host": name, "state": state, "reason": reason}
