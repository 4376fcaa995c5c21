"""Lists of rows (an id, a few short fields, one long text: a tool sequence, a task) that stay
readable on a narrow terminal."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import out
from soloflow_langgraph.cli.namespaces_cmd import id_column

__all__ = ["NARROW", "print_listing"]

NARROW = 110
"""Below this many columns a list is printed as one block per row, not as a table: a table
would leave the long text (a sequence of long tool names, a task) a sliver."""

Row = tuple[str, Sequence[str], str]
"""An id, its short fields (in ``headers`` order) and its long text."""


def print_listing(
    *,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Row],
    long: str = "sequence",
    label_long: bool = False,
) -> None:
    """Print ``rows`` as a table (the id never cut, short fields never wrapped, the long text
    in the last column, ``long``, folded), or as blocks on a terminal narrower than
    :data:`NARROW` or than the table would need: the id and the fields on one line, the long
    text under them (after ``long:`` when ``label_long``)."""
    if out.width < max(NARROW, _table_width(headers, rows, long=long)):
        if title:
            out.print(f"[bold]{escape(title)}[/]")
        for row_id, fields, text in rows:
            facts = " · ".join(
                _fact(h, v) for h, v in zip(headers[1:], fields, strict=True) if v not in ("", "-")
            )
            if len(row_id) + 2 + len(facts) <= out.width:
                out.print(f"[bold]{escape(row_id)}[/]  {escape(facts)}", overflow="fold")
            else:  # a long id (a UUID): the figures on a line of their own
                out.print(f"[bold]{escape(row_id)}[/]\n  {escape(facts)}", overflow="fold")
            if text:
                label = f"{long}: " if label_long else ""
                out.print(f"  {escape(label + text)}", overflow="fold")
        return
    table = Table(title=title)
    id_column(table, headers[0], [row[0] for row in rows])
    for header in headers[1:]:
        table.add_column(header, no_wrap=True)
    table.add_column(long, overflow="fold", ratio=1)
    for row_id, fields, text in rows:
        table.add_row(escape(row_id), *map(escape, fields), escape(text))
    out.print(table)


def _table_width(headers: Sequence[str], rows: Sequence[Row], *, long: str) -> int:
    """The columns a table of ``rows`` needs with its id and short fields whole and its long
    text at least 24 wide (or its header's width): rich's rules and padding, 3 per column."""
    widths = [
        max([len(h), *(len(row[0]) if i == 0 else len(row[1][i - 1]) for row in rows)])
        for i, h in enumerate(headers)
    ]
    return sum(widths) + max(24, len(long)) + 3 * (len(headers) + 1) + 1


def _fact(header: str, value: str) -> str:
    """``4 tools``, ``54,000 tokens saved``; a word (``pending``, ``✓``, ``unpriced``) alone."""
    return f"{value} {header}" if value[:1].isdigit() or value[:1] in "-$" else value
