"""``soloflow flows stats``: each flow's record and its savings, measured and estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import Context, out, print_json
from soloflow_langgraph.cli.flows_cmd import flows_app

if TYPE_CHECKING:
    from soloflow_core.learning.savings import FlowSavings


def _num(value: float | None, fmt: str = ".0f") -> str:
    return "-" if value is None else format(value, fmt)


def _print(s: FlowSavings) -> None:
    out.print(
        f"[bold]{escape(s.flow)}[/] v{s.version} ({s.source}, {s.status}): confidence "
        f"{s.confidence:.2f}, {s.success_count}/{s.total_executions} executions succeeded",
        highlight=False,
    )
    table = Table(
        "per run",
        "agent (measured)",
        "flow (measured)",
        "saved per run",
        f"saved over {s.completed_runs} completed run(s)",
    )
    for label, attr, fmt in (
        ("model calls", "model_calls", ".1f"),
        ("tokens", "tokens", ".0f"),
        ("cost (USD)", "cost", ".4f"),
        ("latency (ms)", "latency_ms", ".1f"),
    ):
        table.add_row(
            label,
            _num(getattr(s.agent, attr), fmt),
            _num(getattr(s.flow_runs, attr), fmt),
            _num(getattr(s.saved_per_run, attr), fmt),
            _num(getattr(s.saved_total, attr), fmt),
        )
    out.print(table)
    out.print(
        f"  measured over {s.agent.runs} agent run(s) the flow was learned from and "
        f"{s.flow_runs.runs} flow run(s); design-document estimate: "
        f"{_num(s.estimated_tokens_per_occurrence)} tokens per occurrence, "
        f"{_num(s.estimated_token_savings)} over the candidate's occurrences"
        + (f" [dim]({escape(s.savings_method)})[/]" if s.savings_method else ""),
        highlight=False,
    )


@flows_app.command("stats")
def stats(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="One flow (default: every flow)."),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Each flow's outcomes (confidence, successes / executions, status) and its savings: the
    agent runs it replaced (model calls, tokens, cost, latency) against its own runs."""
    from soloflow_core.learning.service import flow_savings

    c: Context = ctx.obj
    store = c.store()
    ctx.call_on_close(store.close)
    rows = flow_savings(store, c.user, c.agent, names=None if name is None else [name])
    if as_json:
        print_json([r.as_dict() for r in rows])
        return
    if not rows:
        out.print("no registered flow")
        return
    for row in rows:
        _print(row)
