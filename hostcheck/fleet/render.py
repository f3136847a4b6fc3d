"""The fleet's output formats (the table is printed, not rendered to text)."""

from __future__ import annotations

from typing import Callable

from hostcheck.fleet.analyze import FleetReport
from hostcheck.fleet.document import render_json, render_jsonl

RENDERERS: dict[str, Callable[[FleetReport], str]] = {
    "json": render_json,
    "jsonl": render_jsonl,
}
