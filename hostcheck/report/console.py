"""How hostcheck's tables look on a terminal: the title on the left, one rule under the
header, no padding at the edges (rich, imported when a table is made)."""

from __future__ import annotations


def titled_table(title: str, *, collapse_padding: bool = True):
    """An empty rich Table in that look; the caller adds its columns and rows."""
    from rich import box
    from rich.table import Table

    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=collapse_padding,
    )
