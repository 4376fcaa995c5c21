"""``soloflow runs trace RUN_ID`` and ``soloflow flows runs trace FLOW_RUN_ID``: a run's trace
as a tree (durations, tokens, cost, the critical path), as JSON, or as OTLP JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.tree import Tree

from soloflow_langgraph.cli.app import Context, fail, out, print_json
from soloflow_langgraph.cli.flowrun_cmd import runs_app as flow_runs_app
from soloflow_langgraph.cli.runs_cmd import runs_app

if TYPE_CHECKING:
    from soloflow_core.tracing import Span, TraceNode

_JSON = typer.Option(False, "--json", help="The tree as JSON (spans, roll-ups, the critical path).")
_OTLP = typer.Option(
    None,
    "--otlp-json",
    help="Write the trace as OTLP JSON to this file ('-': stdout).",
    dir_okay=False,
)


def _label(node: TraceNode) -> str:
    s = node.span
    parts = [f"[bold]{escape(s.name)}[/]"]
    parts.append("…" if s.duration_ms is None else f"{s.duration_ms:,.1f} ms")
    if node.input_tokens or node.output_tokens:
        parts.append(f"tokens {node.input_tokens:,} in / {node.output_tokens:,} out")
    if node.cost or node.unpriced:
        parts.append(escape(node.cost_text))
    attempt = s.attributes.get("soloflow.attempt")
    if attempt is not None and s.kind == "execute_tool":
        parts.append(f"attempt {attempt}")
    if s.status == "error":
        parts.append(f"[red]✗ {escape((s.error or 'error')[:100])}[/]")
    text = "  ".join(parts)
    return f"[yellow]★[/] {text}" if node.critical else f"  {text}"


def _add(tree: Tree, node: TraceNode) -> None:
    branch = tree.add(_label(node))
    for child in node.children:
        _add(branch, child)


def show_trace(spans: list[Span], what: str, *, as_json: bool, otlp: Path | None) -> None:
    """Print (or export) the trace made of ``spans``; ``what`` names the run in messages."""
    from soloflow_core.tracing import build_tree, otlp_json, tree_json

    if not spans:
        fail(
            f"{escape(what)} has no trace: no such run in this namespace (check --user/--agent), "
            "or it ran before traces were kept"
        )
    if otlp is not None:
        text = json.dumps(otlp_json(spans))
        if str(otlp) == "-":
            print(text)
        else:
            otlp.write_text(text + "\n")
            out.print(
                f"wrote {len(spans)} spans of {escape(what)} as OTLP JSON to {escape(str(otlp))}"
            )
        return
    roots = build_tree(spans)
    if as_json:
        print_json(tree_json(roots))
        return
    tree = Tree(f"{escape(what)}  [dim](★ critical path)[/]")
    for root in roots:
        _add(tree, root)
    out.print(tree)


@runs_app.command("trace")
def runs_trace(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The task run id (soloflow runs list)."),
    as_json: bool = _JSON,
    otlp: Path | None = _OTLP,
) -> None:
    """A captured agent run's trace: the agent, its model calls (tokens, cost) and tool calls."""
    c: Context = ctx.obj
    store = c.store()
    spans = store.get_spans(run_id, **c.ns)
    for span in list(spans):  # a flow called as a tool: its run's spans sit under the tool call
        nested = (
            span.attributes.get("soloflow.flow_run.id") if span.kind == "execute_tool" else None
        )
        if isinstance(nested, str):
            spans.extend(store.get_spans(nested, **c.ns))
    show_trace(spans, f"run {run_id}", as_json=as_json, otlp=otlp)


@flow_runs_app.command("trace")
def flow_runs_trace(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The flow run id (frun_…)."),
    as_json: bool = _JSON,
    otlp: Path | None = _OTLP,
) -> None:
    """A flow run's trace: its invocations, steps, tool calls (attempts) and approval waits."""
    c: Context = ctx.obj
    show_trace(
        c.store().get_spans(run_id, **c.ns), f"flow run {run_id}", as_json=as_json, otlp=otlp
    )
