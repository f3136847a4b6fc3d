"""A self-contained HTML page: inline CSS and SVG, no script, no network request (a
Content-Security-Policy forbids any). Every string from a report is escaped."""

from __future__ import annotations

import html
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from hostcheck import __version__
from hostcheck.fleet.analyze import FleetReport
from hostcheck.fleet.document import iso
from hostcheck.fleet.outliers import numeric
from hostcheck.fleet.render_table import (
    DRIFT_HEADERS,
    OUTLIER_HEADERS,
    drift_cells,
    host_reason,
    number,
    outlier_cells,
    workers_cell,
)
from hostcheck.report.entry import REPORT, VERDICTS, HostEntry

MAX_BARS = 100  # hosts per chart; more are shown as the worst ones

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2329;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#555;margin:0 0 12px}
.tiles{display:flex;flex-wrap:wrap;gap:8px}
.tile{padding:6px 12px;border-radius:6px;min-width:90px}
.tile b{display:block;font-size:20px}
table{border-collapse:collapse;margin:4px 0}
th,td{border:1px solid #d5d9de;padding:3px 7px;text-align:left;vertical-align:top}
thead th{background:#f1f3f5;position:sticky;top:0}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.grid td{text-align:center;font-size:12px;text-transform:uppercase;min-width:48px}
.grid td.reason{text-align:left;text-transform:none;font-size:13px}
.grid td.os{text-align:left;text-transform:none;font-size:13px;white-space:nowrap}
.s-pass{background:#d3f0d9;color:#0b5a1f}.s-warn{background:#fff0c2;color:#6b4e00}
.s-fail{background:#f8c9c9;color:#8a0f0f;font-weight:600}.s-skip{background:#eef0f2;color:#68717a}
.s-error{background:#ecd3f5;color:#64108a;font-weight:600}
.s-unreachable,.s-timeout,.s-no-report{background:#e6a3a3;color:#5c0000;font-weight:600}
.s-unreadable{background:#d9c3ef;color:#3e1468;font-weight:600}
.s-missing{background:#fff;color:#aaa}
.charts{display:flex;flex-wrap:wrap;gap:24px}
figure{margin:0}figcaption{font-weight:600;margin-bottom:4px}
svg text{font:11px system-ui,sans-serif;fill:#1d2329}
.bar-pass{fill:#3fa45b}.bar-warn{fill:#e0a800}.bar-fail,.bar-error{fill:#d64545}
.bar-skip,.bar-none{fill:#9aa3ab}.bar-light{fill:#9cc7e8}
.median{stroke:#333;stroke-dasharray:4 3}
.small{color:#555;font-size:12px}
"""


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Chart:
    title: str
    metrics: tuple[str, ...]  # one bar per metric and host
    labels: tuple[str, ...]
    unit: str
    scale: float  # shown value = measured x scale
    higher_is_better: bool = True


CHARTS = (
    Chart("loop throughput", ("loop.throughput",), ("samples/s",), "samples/s", 1.0),
    Chart(
        "loop data-wait (share of step time)",
        ("loop.data-wait",),
        ("data-wait",),
        "%",
        100.0,
        higher_is_better=False,
    ),
    Chart(
        "host-to-device bandwidth",
        ("loop.pinned bandwidth", "loop.pinned vs pageable"),
        ("pinned", "pageable"),
        "GB/s",
        1e-9,
    ),
)


def _tiles(report: FleetReport) -> str:
    counts = report.verdict_counts
    tiles = [
        f'<div class="tile s-{v}"><b>{counts[v]}</b>{e(v)}</div>' for v in VERDICTS if counts[v]
    ]
    return f'<div class="tiles">{"".join(tiles)}</div>'


def _grid(report: FleetReport) -> str:
    checks = list(report.check_counts)
    head = "".join(f"<th>{e(c)}</th>" for c in checks)
    rows = []
    for entry in report.entries:
        verdict = entry.verdict
        cells = [
            f"<th>{e(entry.host)}</th>",
            f'<td class="s-{verdict}">{e(verdict)}</td>',
            f'<td class="os">{e(entry.facts.get("os") or "")}</td>',
        ]
        if entry.state == REPORT:
            for check_id in checks:
                status = entry.checks.get(check_id, "missing")
                title = entry.problems.get(check_id, "")
                tip = f' title="{e(title)}"' if title else ""
                cells.append(f'<td class="s-{status}"{tip}>{e(status)}</td>')
        elif checks:
            cells.append(f'<td class="reason" colspan="{len(checks)}">{e(entry.reason)}</td>')
        cells.append(f'<td class="reason">{e(workers_cell(entry))}</td>')
        cells.append(
            f'<td class="reason">{e(host_reason(entry) if entry.state == REPORT else "")}</td>'
        )
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        '<table class="grid"><thead><tr><th>host</th><th>verdict</th><th>os</th>'
        f"{head}<th>workers</th><th>reasons</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _chart(chart: Chart, entries: Sequence[HostEntry]) -> str:
    rows = []
    for entry in entries:
        values = [entry.values.get(m) for m in chart.metrics]
        if any(numeric(v) for v in values):
            shown = [v * chart.scale if numeric(v) else None for v in values]
            rows.append((entry, shown))
    if not rows:
        return ""
    firsts = [shown[0] for _, shown in rows if shown[0] is not None]
    middle = statistics.median(firsts) if firsts else None
    total = len(rows)
    caption = f"{chart.title}, {chart.unit}"
    if total > MAX_BARS:

        def badness(row: tuple) -> float:
            first = row[1][0]
            if first is None:
                return float("-inf")
            return -first if chart.higher_is_better else first

        rows = sorted(rows, key=badness, reverse=True)[:MAX_BARS]
        caption += f" (the {MAX_BARS} worst of {total} hosts)"
    top = max(max((v for v in shown if v is not None), default=0) for _, shown in rows) or 1
    bar_h, gap = 12, 6
    label_w, plot_w, value_w = 150, 320, 70
    row_h = bar_h * len(chart.metrics) + gap
    height = row_h * len(rows) + 24
    width = label_w + plot_w + value_w
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{e(caption)}">'
    ]
    for index, (entry, shown) in enumerate(rows):
        y = index * row_h
        name = entry.host if len(entry.host) <= 22 else entry.host[:21] + "…"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + bar_h * len(shown) / 2 + 4:.1f}" '
            f'text-anchor="end"><title>{e(entry.host)}</title>{e(name)}</text>'
        )
        # the colour of the threshold this very value is judged against (its finding)
        status = entry.statuses.get(chart.metrics[0], "none")
        for k, value in enumerate(shown):
            if value is None:
                continue
            klass = f"bar-{status}" if k == 0 else "bar-light"
            bar_w = max(1.0, plot_w * value / top) if value > 0 else 0
            by = y + k * bar_h
            parts.append(
                f'<rect class="{klass}" x="{label_w}" y="{by}" width="{bar_w:.1f}" '
                f'height="{bar_h - 1}"><title>{e(entry.host)} {e(chart.labels[k])}: '
                f"{e(number(value))} {e(chart.unit)}</title></rect>"
                f'<text x="{label_w + bar_w + 4:.1f}" y="{by + bar_h - 2}">'
                f"{e(number(round(value, 3)))}</text>"
            )
    if middle is not None and middle > 0:
        x = label_w + plot_w * middle / top
        parts.append(
            f'<line class="median" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}"/>'
            f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle">'
            f"median {e(number(round(middle, 3)))}</text>"
        )
    parts.append("</svg>")
    legend = ""
    if len(chart.metrics) > 1:
        legend = (
            f'<div class="small">dark: {e(chart.labels[0])} (coloured by its finding\'s '
            f"status), light: {e(chart.labels[1])}</div>"
        )
    return f"<figure><figcaption>{e(caption)}</figcaption>{''.join(parts)}{legend}</figure>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric_from: int = 99) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{e(cell)}</td>' if i >= numeric_from else f"<td>{e(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _sections(report: FleetReport) -> list[str]:
    parts = []
    counts = report.check_counts
    if counts:
        statuses = ("pass", "warn", "fail", "skip", "error", "missing")
        rows = [[c, *(row[s] for s in statuses)] for c, row in counts.items()]
        parts += ["<h2>Hosts per check</h2>", _table(["check", *statuses], rows, 1)]
    parts.append(f"<h2>Outliers ({len(report.outliers)})</h2>")
    if report.outliers:
        parts.append(_table(OUTLIER_HEADERS, [outlier_cells(o) for o in report.outliers]))
    else:
        parts.append('<p class="small">none: hosts with the same hardware measure alike</p>')
    if report.baseline is None:
        parts.append(f'<h2>Drift</h2><p class="small">{e(report.baseline_note)}</p>')
    else:
        parts.append(f"<h2>Drift since {e(report.baseline.source)} ({len(report.drift)})</h2>")
        rows = [drift_cells(c) for c in report.drift]
        parts.append(
            _table(DRIFT_HEADERS, rows) if rows else '<p class="small">nothing changed</p>'
        )
    if report.ignored:
        parts.append('<h2>Not read</h2><p class="small">' + e(", ".join(report.ignored)) + "</p>")
    return parts


def render_html(report: FleetReport) -> str:
    baseline = f"baseline {report.baseline.source}" if report.baseline else "no baseline"
    charts = [c for c in (_chart(chart, report.entries) for chart in CHARTS) if c]
    body = [
        "<h1>hostcheck fleet</h1>",
        f'<p class="meta">{len(report.entries)} hosts in {e(report.directory)} · profile '
        f"{e(report.profile_name)} · {e(baseline)} · {iso(report.generated_at)} · "
        f"hostcheck {e(__version__)} · exit code {report.exit_code}</p>",
        _tiles(report),
        "<h2>Hosts and checks</h2>",
        _grid(report),
    ]
    if charts:
        body += ["<h2>Data loading per host</h2>", f'<div class="charts">{"".join(charts)}</div>']
    body += _sections(report)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>hostcheck fleet: {e(report.directory)}</title><style>{CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )
