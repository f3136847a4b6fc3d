"""The human summary: one line per host, per-check counts, outliers, drift, a verdict line."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hostcheck.fleet.analyze import FleetReport
from hostcheck.fleet.entry import STATUSES, VERDICTS, HostEntry
from hostcheck.report.table import STYLE

VERDICT_STYLE = {
    **STYLE,
    "unreachable": "bold red",
    "timeout": "bold red",
    "no-report": "bold red",
    "unreadable": "magenta",
}


def number(value: float) -> str:
    """Four significant digits, plain for ordinary sizes."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def host_reason(entry: HostEntry) -> str:
    if entry.reason:
        return entry.reason
    return ", ".join(f"{c} ({entry.checks[c]})" for c in entry.reasons)


def _hosts(report: FleetReport) -> Table:
    table = Table(title="hosts", title_justify="left", expand=False)
    table.add_column("host", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("reasons")
    for entry in report.entries:
        verdict = entry.verdict
        table.add_row(
            Text(entry.host),
            Text(verdict.upper(), style=VERDICT_STYLE[verdict]),
            Text(host_reason(entry)),
        )
    return table


def _checks(report: FleetReport) -> Table:
    table = Table(title="hosts per check and status", title_justify="left", expand=False)
    table.add_column("check", no_wrap=True)
    for status in (*STATUSES, "missing"):
        table.add_column(status, justify="right", style=VERDICT_STYLE.get(status, ""))
    for check_id, row in report.check_counts.items():
        table.add_row(Text(check_id), *(str(row[s]) for s in (*STATUSES, "missing")))
    return table


def _outliers(report: FleetReport) -> Table:
    table = Table(
        title="outliers (far from the median of hosts with the same hardware)",
        title_justify="left",
        expand=False,
    )
    for column in ("host", "metric", "value", "median", "x median", "z", "group (hosts)"):
        table.add_column(column, justify="right" if column in ("value", "median", "z") else "left")
    for o in report.outliers:
        table.add_row(
            Text(o.host),
            Text(o.metric),
            number(o.value),
            number(o.median),
            "" if o.ratio is None else f"{o.ratio:.2f}",
            "MAD 0" if o.z is None else f"{o.z:+.1f}",
            Text(f"{o.group} ({o.group_size})"),
        )
    return table


def _drift(report: FleetReport) -> Table:
    assert report.baseline is not None
    table = Table(
        title=Text(f"drift since {report.baseline.source}"), title_justify="left", expand=False
    )
    for column in ("host", "what", "before", "after", "note"):
        table.add_column(column)
    for c in report.drift:
        table.add_row(
            Text(c.host),
            Text(f"{c.kind} {c.key}".strip()),
            Text("" if c.before is None else str(c.before)),
            Text("" if c.after is None else str(c.after)),
            Text(c.note),
        )
    return table


def render_table(report: FleetReport, console: Console) -> None:
    console.print(_hosts(report))
    if report.check_counts:
        console.print(_checks(report))
    if report.outliers:
        console.print(_outliers(report))
    if report.baseline is None:
        console.print(Text(f"drift: {report.baseline_note or 'no baseline'}", style="dim"))
    elif report.drift:
        console.print(_drift(report))
    else:
        console.print(Text(f"drift: nothing changed since {report.baseline.source}"))
    counts = report.verdict_counts
    shown = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])
    console.print(
        Text.assemble(
            ("fleet: ", "bold"),
            f"{len(report.entries)} hosts in {report.directory}: {shown or 'none'}; "
            f"{len(report.outliers)} outliers; {len(report.drift)} changes; "
            f"exit {report.exit_code}",
        )
    )
