"""``soloflow flows find`` and ``soloflow flows versions``: procedural memory from the shell.

The store (SQLAlchemy) is imported inside the commands: the CLI starts without it."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import MAX_LIMIT, Context, out, print_json
from soloflow_langgraph.cli.flows_cmd import flows_app

if TYPE_CHECKING:
    from soloflow_core.store import Store


def _store(ctx: typer.Context) -> Store:
    """The command's store, closed when the command ends (its pooled connections with it)."""
    store = ctx.obj.store()
    ctx.call_on_close(store.close)
    return store


@flows_app.command("find")
def find(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The task (or context) text; '-' reads it from stdin."),
    tools: str | None = typer.Option(
        None,
        "--tools",
        help="Comma-separated tool names the agent has: flows calling any other tool are left out.",
    ),
    limit: int = typer.Option(5, "--limit", min=1, max=MAX_LIMIT, help="At most this many flows."),
    min_confidence: float | None = typer.Option(
        None,
        "--min-confidence",
        min=0.0,
        max=1.0,
        help="Leave out flows below this confidence (default 0.5).",
    ),
    include_unavailable: bool = typer.Option(
        False,
        "--include-unavailable",
        help="With --tools: list flows with missing tools too, marked with them.",
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Find the registered flows that fit a task: full text, tools named, confidence."""
    from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE, ProceduralMemory

    c: Context = ctx.obj
    if text == "-":
        text = sys.stdin.read()
    available = None if tools is None else [x.strip() for x in tools.split(",") if x.strip()]
    from soloflow_core.learning.quality import flows_quality, order_ties_by_quality

    store = _store(ctx)
    matches = ProceduralMemory(store).find_workflow(
        c.user,
        c.agent,
        text,
        available_tools=available,
        min_confidence=DEFAULT_MIN_CONFIDENCE if min_confidence is None else min_confidence,
        limit=limit,
        include_unavailable=include_unavailable,
    )
    metas = [store.get_flow_meta(m.name, version=m.version, **c.ns) for m in matches]
    quality = {name: q for (name, _), q in flows_quality(store, metas, **c.ns).items()}
    matches = order_ties_by_quality(matches, lambda m: quality[m.name].overall)
    if as_json:
        print_json([{**m.as_dict(), "quality": quality[m.name].as_dict()} for m in matches])
        return
    if not matches:
        out.print("no matching flow")
        return
    table = Table("flow", "version", "source", "status", "confidence", "score", "quality", "why")
    for m in matches:
        table.add_row(
            escape(m.name),
            str(m.version),
            m.source,
            m.status,
            f"{m.confidence:.2f}",
            f"{m.score:.3f}",
            f"{quality[m.name].overall:.2f}",
            escape(m.why),
        )
    out.print(table)


@flows_app.command("versions")
def versions(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The flow's name."),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """A flow's stored versions, newest first, each with its record."""
    c: Context = ctx.obj
    rows = _store(ctx).list_flow_versions(name, **c.ns)
    if as_json:
        print_json([r.as_dict() for r in rows])
        return
    # Whole at 80 columns: no vertical rules, every value unbroken (a date cut to "2026-11-…"
    # or a source to "auto-lea…" says nothing); only the headers wrap.
    table = Table(box=box.SIMPLE_HEAD)
    for header in ("version", "source", "status", "conf.", "ok / runs", "created", "last used"):
        table.add_column(header, no_wrap=header not in ("version", "ok / runs", "last used"))
    for r in rows:
        table.add_row(
            f"{r.version}{' (latest)' if r.is_latest else ''}",
            r.source,
            r.status,
            f"{r.confidence:.2f}",
            f"{r.success_count} / {r.total_executions}",
            f"{r.created_at:%Y-%m-%d}",
            "-" if r.last_used is None else f"{r.last_used:%Y-%m-%d}",
        )
    out.print(table)


@flows_app.command("route")
def route(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The request; '-' reads it from stdin."),
    tools: str | None = typer.Option(
        None,
        "--tools",
        help="Comma-separated tool names the agent has: flows calling any other tool are left out.",
    ),
    max_flows: int = typer.Option(
        3,
        "--max-flows",
        min=1,
        max=MAX_LIMIT,
        help="Flows weighed, as the middleware's max_flows (default 3).",
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Would a request run a flow with no model call? Each matching flow's verdict and why,
    as SoloFlowMiddleware decides it (nothing runs; auto_execute is taken as on)."""
    from soloflow_core.learning.records import flow_stats
    from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE, ProceduralMemory
    from soloflow_core.memory.router import decide_route

    c: Context = ctx.obj
    if text == "-":
        text = sys.stdin.read()
    store = _store(ctx)
    available = None if tools is None else [x.strip() for x in tools.split(",") if x.strip()]
    matches = ProceduralMemory(store).find_workflow(
        c.user,
        c.agent,
        text,
        available_tools=available,
        min_confidence=DEFAULT_MIN_CONFIDENCE,
        limit=max_flows,
    )
    config = c.learning_config().model_copy(update={"auto_execute": True})
    decision = decide_route(
        store,
        text,
        matches,
        user_id=c.user,
        agent_id=c.agent,
        config=config,
        definition=lambda name: store.get_flow(name, **c.ns).flow,
        stats=lambda name: flow_stats(store, name, **c.ns),
    )
    if as_json:
        print_json(
            {
                "run": decision.run,
                "inputs": decision.inputs,
                "reason": decision.reason,
                "flows": [
                    {
                        "name": k.name,
                        "verdict": k.verdict,
                        "score": k.score,
                        "reasons": list(k.reasons),
                    }
                    for k in decision.checks
                ],
            }
        )
        return
    out.print(
        escape(
            ("runs " + repr(decision.run) if decision.run else "no flow runs")
            + ": "
            + decision.reason
        ),
        highlight=False,
    )
    if decision.checks:
        table = Table("flow", "verdict", "score", "why not")
        for k in decision.checks:
            table.add_row(
                escape(k.name), k.verdict, f"{k.score:.2f}", escape("; ".join(k.reasons) or "-")
            )
        out.print(table)
