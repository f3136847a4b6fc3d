"""`hostcheck list` and `hostcheck explain`: the checks, their thresholds in a profile, and
what each measures."""

from __future__ import annotations

import argparse

from hostcheck.commands.common import EXIT_OK, UsageError, load, profile_options


def add_parsers(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("list", help="show the checks and their thresholds")
    profile_options(listing)

    explain = commands.add_parser("explain", help="what a check measures and why it matters")
    explain.add_argument("check_id", metavar="ID")
    profile_options(explain)


def _flatten(values: object, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(values, dict):
        items: list[tuple[str, object]] = []
        for key, value in values.items():
            items += _flatten(value, f"{prefix}{key}.")
        return items
    return [(prefix.rstrip("."), values)]


def run_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hostcheck.registry import CHECKS

    profile = load(args)
    table = Table(title=f"checks and thresholds (profile {profile.name})", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("enabled", no_wrap=True)
    table.add_column("what it checks")
    table.add_column("thresholds")
    for check_id, spec in CHECKS.items():
        section = dict(profile.section(check_id))
        enabled = section.pop("enabled", True)
        thresholds = "\n".join(f"{k} = {_show(v)}" for k, v in _flatten(section))
        table.add_row(check_id, "yes" if enabled else "no", escape(spec.title), escape(thresholds))
    Console(highlight=False).print(table)
    return EXIT_OK


def _show(value: object) -> str:
    """A threshold as it would be written in a profile."""
    import json

    return value if isinstance(value, str) else json.dumps(value)


def run_explain(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from hostcheck.registry import CHECKS

    spec = CHECKS.get(args.check_id)
    if spec is None:
        raise UsageError(f"explain {args.check_id}: no such check (known: {', '.join(CHECKS)})")
    profile = load(args)
    out = Console(highlight=False)
    out.print(f"[bold]{spec.id}[/bold]: {escape(spec.title)}\n")
    out.print(escape(spec.explain) + "\n")
    out.print(f"Thresholds in profile {escape(profile.name)}:")
    for key, value in _flatten(profile.section(spec.id)):
        out.print(escape(f"  {spec.id}.{key} = {_show(value)}"))
    if spec.roles:
        out.print(f"\nFixed by the role(s): {', '.join(spec.roles)} (see README)")
    return EXIT_OK
