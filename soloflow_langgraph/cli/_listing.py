"""Lists of candidates (an id, a few short fields, a tool sequence) that stay readable on a
narrow terminal."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import out
from soloflow_langgraph.cli.namespaces_cmd import id_column

__all__ = ["NARROW", "print_sequences"]

NARROW = 110
"""Below this many columns a list is printed as one block per row, not as a table: a table
would leave the sequence (long tool names) a sliver."""

Row = tuple[str, Sequence[str], str]
"""An id, its short fields (in ``headers`` order) and its tool sequence."""


def print_sequences(*, title: str | None, headers: Sequence[str], rows: Sequence[Row]) -> None:
    """Print ``rows`` as a table (the id never cut, short fields never wrapped, the sequence
    folded), or as blocks on a terminal narrower than :data:`NARROW`."""
    if out.width < NARROW:
        if title:
            out.print(f"[bold]{escape(title)}[/]")
        for row_id, fields, seq in rows:
            facts = " · ".join(f"{h} {v}" for h, v in zip(headers[1:], fields, strict=True))
            out.print(
                f"[bold]{escape(row_id)}[/]  {escape(facts)}\n  {escape(seq)}", overflow="fold"
            )
        return
    table = Table(title=title)
    id_column(table, headers[0], [row[0] for row in rows])
    for header in headers[1:]:
        table.add_column(header, no_wrap=True)
    table.add_column("sequence", overflow="fold", ratio=1)
    for row_id, fields, seq in rows:
        table.add_row(escape(row_id), *map(escape, fields), escape(seq))
    out.print(table)
