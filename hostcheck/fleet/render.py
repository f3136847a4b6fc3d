"""The fleet's output formats (the table is printed, not rendered to text)."""

from __future__ import annotations

from typing import Callable

from hostcheck.fleet.analyze import FleetReport
from hostcheck.fleet.document import render_json, render_jsonl
from hostcheck.fleet.render_html import render_html
from hostcheck.fleet.render_junit import render_junit
from hostcheck.fleet.render_prom import render_prom

RENDERERS: dict[str, Callable[[FleetReport], str]] = {
    "json": render_json,
    "jsonl": render_jsonl,
    "junit": render_junit,
    "prom": render_prom,
    "html": render_html,
}
