"""The human summary: one line per host, per-check counts, outliers, drift, a verdict line.

Plain aligned columns rather than boxed tables: 10,000 hosts print in a blink, and each
host stays on one line for grep."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from hostcheck.fleet.analyze import FleetReport
from hostcheck.fleet.drift import Change
from hostcheck.fleet.outliers import Outlier
from hostcheck.report.entry import REPORT, STATUSES, VERDICTS, HostEntry, loader_text
from hostcheck.report.table import STYLE

VERDICT_STYLE = {
    **STYLE,
    "unreachable": "bold red",
    "timeout": "bold red",
    "no-report": "bold red",
    "unreadable": "magenta",
}
MAX_WIDTH = 40  # widest column of names before the last column
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def one_line(text: str) -> str:
    """Report text on one line: control characters (newlines, escapes) become a space."""
    return _CONTROL.sub(" ", text)


def number(value: float) -> str:
    """Four significant digits for floats; integers as they are."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def host_reason(entry: HostEntry) -> str:
    if entry.reason:
        return entry.reason
    return ", ".join(f"{c} ({entry.checks[c]})" for c in entry.reasons)


def columns(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    styles: Sequence[str | None] = (),
    right: Sequence[int] = (),
) -> Text:
    """A titled block of aligned columns; the last column is not padded. `styles[i]` is a
    style for row i's second column (the status)."""
    cells = [[one_line(str(c)) for c in row] for row in rows]
    widths = [
        min(MAX_WIDTH, max([len(headers[i]), *(len(row[i]) for row in cells)]))
        for i in range(len(headers))
    ]

    def pad(i: int, value: str) -> str:
        if i == len(headers) - 1 and i not in right:
            return value
        return f"{value:>{widths[i]}}" if i in right else f"{value:<{widths[i]}}"

    text = Text()
    text.append(f"{title}\n", style="bold")
    text.append("  ".join(pad(i, h) for i, h in enumerate(headers)).rstrip() + "\n", style="dim")
    for index, row in enumerate(cells):
        last = max((i for i, value in enumerate(row) if value), default=0)
        for i, value in enumerate(row[: last + 1]):
            style = styles[index] if i == 1 and index < len(styles) else None
            text.append(pad(i, value) if i < last or i in right else value, style=style)
            text.append("  " if i < last else "\n")
    return text


def workers_cell(entry: HostEntry) -> str:
    """The host's recommended DataLoader settings (the dataloader check); "" without a report."""
    return loader_text(entry.dataloader) if entry.state == REPORT else ""


def _hosts(report: FleetReport) -> Text:
    rows = [
        (e.host, e.verdict.upper(), e.facts.get("os") or "", workers_cell(e), host_reason(e))
        for e in report.entries
    ]
    styles = [VERDICT_STYLE[e.verdict] for e in report.entries]
    headers = ("host", "verdict", "os", "workers", "reasons")
    return columns(f"hosts ({len(rows)})", headers, rows, styles)


def _checks(report: FleetReport) -> Text:
    heads = (*STATUSES, "missing")
    rows = [(c, *(str(row[s]) for s in heads)) for c, row in report.check_counts.items()]
    title = "hosts per check and status"
    return columns(title, ("check", *heads), rows, right=range(1, len(heads) + 1))


OUTLIER_HEADERS = ("host", "metric", "value", "median", "x median", "z", "hardware group")
DRIFT_HEADERS = ("host", "what", "before", "after", "note")


def outlier_cells(o: Outlier) -> tuple[str, ...]:
    return (
        o.host,
        o.metric,
        number(o.value),
        number(o.median),
        "" if o.ratio is None else f"{o.ratio:.2f}",
        "MAD 0" if o.z is None else f"{o.z:+.1f}",
        f"{o.group} ({o.group_size} hosts)",
    )


def drift_cells(c: Change) -> tuple[str, ...]:
    before = "" if c.before is None else str(c.before)
    after = "" if c.after is None else str(c.after)
    return (c.host, f"{c.kind} {c.key}".strip(), before, after, c.note)


def _outliers(report: FleetReport) -> Text:
    rows = [outlier_cells(o) for o in report.outliers]
    title = f"outliers ({len(rows)}): far from the median of hosts with the same hardware"
    return columns(title, OUTLIER_HEADERS, rows, right=(2, 3, 4, 5))


def _drift(report: FleetReport) -> Text:
    assert report.baseline is not None
    rows = [drift_cells(c) for c in report.drift]
    title = f"drift ({len(rows)}) since {report.baseline.source}"
    return columns(title, DRIFT_HEADERS, rows)


def render_table(report: FleetReport, console: Console) -> None:
    def show(text: Text) -> None:
        console.print(text, soft_wrap=True)

    show(_hosts(report))
    if report.check_counts:
        show(_checks(report))
    if report.outliers:
        show(_outliers(report))
    if report.baseline is None:
        show(Text(f"drift: {report.baseline_note or 'no baseline'}\n", style="dim"))
    elif report.drift:
        show(_drift(report))
    else:
        show(Text(f"drift: nothing changed since {report.baseline.source}\n"))
    counts = report.verdict_counts
    shown = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])
    show(
        Text.assemble(
            ("fleet: ", "bold"),
            one_line(
                f"{len(report.entries)} hosts in {report.directory}: {shown or 'none'}; "
                f"{len(report.outliers)} outliers; {len(report.drift)} changes; "
                f"exit {report.exit_code}"
            ),
        )
    )
