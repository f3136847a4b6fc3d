"""The human report: one row per check, the findings that matter, a verdict line."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim", "error": "magenta"}


def render_table(document: dict, console: Console, verbose: bool = False) -> None:
    table = Table(
        title=Text(
            f"hostcheck {document['tool']['version']} on {document['host']['hostname']} "
            f"(profile {document['profile']['name']})"
        ),
        title_justify="left",
        expand=False,
    )
    # Text, not str: rich parses no markup and emoji codes in them (nor imports its emoji table)
    table.add_column(Text("check"), no_wrap=True)
    table.add_column(Text("status"), no_wrap=True)
    table.add_column(Text("measured"))
    table.add_column(Text("expected"))
    for check in document["checks"]:
        status = check["status"]
        table.add_row(
            Text(check["id"]),
            Text(status.upper(), style=STYLE[status]),
            Text(check["summary"]),
            Text(check["expected"]),
        )
        if verbose:
            for finding in check["findings"]:
                source = f" [{finding['source']}]" if finding["source"] else ""
                table.add_row(
                    Text(""),
                    Text(finding["status"], style=STYLE[finding["status"]]),
                    Text(f"{finding['name']}: {finding['display'] or finding['measured']}{source}"),
                    Text("" if finding["expected"] is None else str(finding["expected"])),
                )
    console.print(table)
    to_fix = [c for c in document["checks"] if c["remedy"] and c["status"] in ("warn", "fail")]
    if to_fix:
        console.print(Text("to fix:", style="bold"))
        first_with: dict[str, str] = {}
        for check in to_fix:
            remedy = check["remedy"]
            shown = f"as {first_with[remedy]} above" if remedy in first_with else remedy
            first_with.setdefault(remedy, check["id"])
            console.print(Text.assemble("  ", (check["id"], STYLE[check["status"]]), f": {shown}"))
    counts = document["counts"]
    summary = ", ".join(f"{counts[s]} {s}" for s in ("pass", "warn", "fail", "skip", "error"))
    verdict = document["verdict"]
    console.print(
        Text.assemble(
            ("verdict: ", "bold"),
            (verdict.upper(), STYLE[verdict]),
            f"  ({summary}; {document['duration_s']:.2f} s; exit {document['exit_code']})",
        )
    )
