"""``soloflow namespaces``: the (user, agent) pairs holding data, and the hint an empty
listing gives."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import typer
from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import Context, app, err, out, print_json

__all__ = ["hint_other_namespaces", "id_column"]


@app.command("namespaces")
def namespaces(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="JSON only.")
) -> None:
    """List the (user, agent) namespaces that hold data, with counts: pass one as --user/--agent."""
    c: Context = ctx.obj
    rows = c.store().namespaces()
    if as_json:
        print_json(
            [
                {
                    "user_id": r.user_id,
                    "agent_id": r.agent_id,
                    "runs": r.runs,
                    "candidates": r.candidates,
                    "flows": r.flows,
                    "flow_runs": r.flow_runs,
                }
                for r in rows
            ]
        )
        return
    table = Table("user", "agent", "runs", "candidates", "flows", "flow runs", title="namespaces")
    for r in rows:
        table.add_row(
            escape(r.user_id),
            escape(r.agent_id),
            str(r.runs),
            str(r.candidates),
            str(r.flows),
            str(r.flow_runs),
        )
    out.print(table)
    if not rows:
        out.print("the database holds no data yet", highlight=False)


def hint_other_namespaces(c: Context, what: str) -> None:
    """After an empty listing of ``what``: say (on stderr) which namespaces hold data."""
    others = [r for r in c.store().namespaces() if (r.user_id, r.agent_id) != (c.user, c.agent)]
    if not others:
        return
    names = ", ".join(
        f"--user {shlex.quote(r.user_id)} --agent {shlex.quote(r.agent_id)}" for r in others[:5]
    )
    more = f" and {len(others) - 5} more (soloflow namespaces)" if len(others) > 5 else ""
    err.print(
        f"no {what} in namespace {c.user}/{c.agent}; data is held under: {names}{more}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def id_column(table: Table, header: str, ids: Sequence[str]) -> None:
    """Add an id column that is never cut nor wrapped: the other columns fold first."""
    table.add_column(header, no_wrap=True, min_width=max([len(header), *map(len, ids)]))
