"""``soloflow flows run | resume | status | cancel | history | prune`` and ``soloflow flows
runs list | approve | reject``: flow runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli._flow_runs import decide, interruptible, report_result, runtime_for
from soloflow_langgraph.cli._resolve import resolve_flow, resolve_id
from soloflow_langgraph.cli.app import MAX_LIMIT, Context, fail, out, print_json
from soloflow_langgraph.cli.flows_cmd import flows_app
from soloflow_langgraph.cli.namespaces_cmd import hint_other_namespaces, id_column

if TYPE_CHECKING:
    from soloflow_core.store.flowruns import FlowRunRecord

_TOOLS_HELP = "module:ATTR naming tools the steps call (repeatable); plugins register the rest."
_RUN_HELP = "The flow run id (frun_…), or a unique prefix of it."

runs_app = typer.Typer(
    help="Flow runs: list them, answer the ones waiting for approval.", no_args_is_help=True
)
flows_app.add_typer(runs_app, name="runs")


def _run_id(ctx: typer.Context, typed: str) -> str:
    return resolve_id(ctx.obj, "flow_run", typed)


def _resumable(rec: FlowRunRecord) -> bool:
    """Whether `flows resume` carries the run on without --force: it was interrupted, or it
    is running (not waiting for approval) and its process is gone."""
    from soloflow_langgraph.runtime.support import owner_alive

    if rec.state == "interrupted":
        return True
    return (
        rec.state == "running" and not rec.waiting_for_approval and owner_alive(rec.owner) is False
    )


def _shown_state(c: Context, row: dict[str, Any]) -> tuple[str, bool]:
    """A listed run's state as shown, and whether it is resumable (one more read only for a
    running run whose process is gone)."""
    from soloflow_langgraph.runtime.support import owner_alive

    state = str(row["status"])
    if state == "interrupted":
        return state, True
    if state != "running" or owner_alive(row["owner"]) is not False:
        return state, False
    if _resumable(c.store().get_flow_run(row["id"], **c.ns)):
        return "running (process gone)", True
    return state, False


_EXAMPLE = '\'{"email": "a@b.c"}\''


def _read_inputs(value: str) -> dict[str, Any]:
    """``--input``: a JSON object, or ``@FILE`` holding one (as curl takes a body)."""
    where = "--input"
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            value = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"--input {escape(str(path))}: cannot read the file ({escape(str(exc))})")
        where = f"--input {escape(str(path))}"
    try:
        inputs = json.loads(value)
    except ValueError as exc:
        hint = ""
        if _names_a_file(value):
            hint = f"; to read the file, write --input @{escape(value)}"
        elif value.lstrip().startswith("{'"):
            hint = f"; JSON quotes with double quotes: {_EXAMPLE}"
        fail(f"{where} is not JSON: {escape(str(exc))}{hint}")
    except RecursionError:
        fail(f"{where} is nested too deeply; pass a flat JSON object, e.g. {_EXAMPLE}")
    if not isinstance(inputs, dict):
        fail(f"{where} must be a JSON object, e.g. {_EXAMPLE}")
    return inputs


def _names_a_file(value: str) -> bool:
    try:
        return len(value) < 4096 and Path(value).is_file()
    except (OSError, ValueError):  # a name too long for the system, a NUL in it
        return False


@flows_app.command("run")
def run(
    ctx: typer.Context,
    name: str = typer.Argument(
        ..., help="The flow's name, or a unique prefix of it or of its slug."
    ),
    input_json: str = typer.Option(
        "{}", "--input", help="The flow inputs as a JSON object, or @FILE holding one."
    ),
    task: str | None = typer.Option(
        None, "--task", help="Recover missing inputs from this task text."
    ),
    tools: list[str] = typer.Option([], "--tools", help=_TOOLS_HELP),
    as_json: bool = typer.Option(
        False, "--json", help="Only the result as JSON (it holds the run id)."
    ),
) -> None:
    """Run a registered flow with no model call. Without --json, the first line printed is
    the flow run id (printed before any step runs: use it with `flows status`/`cancel`
    meanwhile)."""
    from soloflow_langgraph.runtime.inputs import inputs_from_task

    inputs = _read_inputs(input_json)
    runtime = runtime_for(ctx, tools)
    flow = runtime.flow(resolve_flow(ctx.obj, name))
    if task:
        inputs = {**inputs_from_task(flow, task), **inputs}
    seen: list[str] = []

    def started(run_id: str) -> None:
        seen.append(run_id)
        if not as_json:
            print(run_id, flush=True)

    with interruptible(runtime, lambda: seen[0] if seen else None):
        result = runtime.run(flow, inputs, on_started=started)
    report_result(result, as_json)


@flows_app.command("resume")
def resume(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=_RUN_HELP),
    tools: list[str] = typer.Option([], "--tools", help=_TOOLS_HELP),
    force: bool = typer.Option(
        False, "--force", help="Even if the process that ran it seems alive."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Carry on a run that was interrupted or whose process ended: completed steps are not
    run again."""
    runtime, rid = runtime_for(ctx, tools), _run_id(ctx, run_id)
    with interruptible(runtime, lambda: rid):
        result = runtime.resume(rid, force=force)
    report_result(result, as_json)


@flows_app.command("status")
def status(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=_RUN_HELP),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """A flow run's state and its steps' states."""
    c: Context = ctx.obj
    rec = c.store().get_flow_run(_run_id(ctx, run_id), **c.ns)
    if as_json:
        print_json(
            {
                "run_id": rec.id,
                "flow": rec.flow_name,
                "version": rec.flow_version,
                "state": rec.state,
                "outcome": rec.outcome,
                "waiting_for_approval": rec.waiting_for_approval,
                "cancel_requested": rec.cancel_requested,
                "owner": rec.owner,
                "resumable": _resumable(rec),
                "error": rec.error,
                "started_at": rec.started_at,
                "ended_at": rec.ended_at,
                "outputs": rec.outputs,
                "steps": [
                    {
                        "step": s.step_key,
                        "state": s.state,
                        "attempts": s.attempts,
                        "idempotency_key": s.idempotency_key,
                        "error": s.error,
                    }
                    for s in rec.steps
                ],
            }
        )
        return
    head = f"[bold]{rec.id}[/] flow {rec.flow_name} v{rec.flow_version}: [bold]{rec.state}[/]"
    if rec.waiting_for_approval:
        head += " [yellow](waiting for approval)[/]"
    elif rec.cancel_requested and not rec.terminal:
        head += " (cancel requested)"
    elif _resumable(rec):
        gone = (
            ""
            if rec.state == "interrupted"
            else f" (its process {escape(rec.owner or '?')} is gone)"
        )
        head += f"{gone}; resume it with: soloflow flows resume {rec.id}"
    out.print(head + (f" — {rec.outcome}" if rec.outcome and rec.outcome != rec.state else ""))
    table = Table("step", "state", "attempts", "error")
    for s in rec.steps:
        table.add_row(escape(s.step_key), s.state, str(s.attempts), escape((s.error or "")[:80]))
    out.print(table)


@flows_app.command("cancel")
def cancel(ctx: typer.Context, run_id: str = typer.Argument(..., help=_RUN_HELP)) -> None:
    """Cancel a flow run, from any process: a running one stops before its next step."""
    run_id = _run_id(ctx, run_id)
    rec = runtime_for(ctx, []).cancel(run_id)
    if rec.terminal:
        out.print(f"{run_id}: {rec.state}")
    else:
        out.print(f"{run_id}: cancel requested; process {rec.owner} stops before its next step")


@flows_app.command("history")
def history(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=_RUN_HELP),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Every recorded state transition of a flow run and its steps, oldest first."""
    c: Context = ctx.obj
    moves = c.store().flow_run_history(_run_id(ctx, run_id), **c.ns)
    if as_json:
        print_json(
            [
                {
                    "at": m.at,
                    "step": m.step_key,
                    "from": m.from_state,
                    "to": m.to_state,
                    "detail": m.detail,
                }
                for m in moves
            ]
        )
        return
    table = Table("at", "step", "from", "to", "detail")
    for m in moves:
        table.add_row(
            m.at.isoformat(timespec="milliseconds"),
            escape(m.step_key or "(run)"),
            m.from_state or "",
            m.to_state,
            escape((m.detail or "")[:80]),
        )
    out.print(table)


@runs_app.command("list")
def runs(
    ctx: typer.Context,
    flow: str | None = typer.Option(
        None, "--flow", help="Only this flow's runs (its name or a unique prefix)."
    ),
    state: str | None = typer.Option(
        None,
        "--state",
        help="draft | active | running | interrupted | completed | failed | cancelled",
    ),
    waiting: bool = typer.Option(False, "--waiting", help="Only runs waiting for approval."),
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_LIMIT),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """List flow runs, newest first."""
    c: Context = ctx.obj
    store = c.store()
    if flow is not None:
        flow = resolve_flow(c, flow)
    rows: list[dict[str, Any]] = store.list_flow_runs(
        flow_name=flow, state="running" if waiting else state, limit=limit, **c.ns
    )
    if waiting:
        rows = [r for r in rows if store.get_flow_run(r["id"], **c.ns).waiting_for_approval]
    shown = [_shown_state(c, r) for r in rows]
    if as_json:
        print_json(
            [
                {
                    "run_id": r["id"],
                    "flow": r["flow_name"],
                    "version": r["flow_version"],
                    "state": r["status"],
                    "resumable": resumable,
                    "outcome": r["outcome"],
                    "started_at": r["started_at"],
                    "ended_at": r["ended_at"],
                }
                for r, (_, resumable) in zip(rows, shown, strict=True)
            ]
        )
        return
    table = Table()
    id_column(table, "run", [r["id"] for r in rows])
    for header in ("flow", "state", "outcome", "started"):
        table.add_column(header)
    for r, (state_shown, _) in zip(rows, shown, strict=True):
        table.add_row(
            r["id"],
            escape(f"{r['flow_name']} v{r['flow_version']}"),
            state_shown,
            r["outcome"] or "",
            r["started_at"].isoformat(timespec="seconds"),
        )
    out.print(table)
    if not rows and flow is None and state is None and not waiting:
        hint_other_namespaces(c, "flow runs")


@runs_app.command("approve")
def approve_run(
    ctx: typer.Context,
    run_id: str = typer.Argument(
        ..., help="A flow run waiting for approval (frun_…), or a unique prefix."
    ),
    comment: str | None = typer.Option(None, "--comment", help="Recorded with the decision."),
    tools: list[str] = typer.Option([], "--tools", help=_TOOLS_HELP),
) -> None:
    """Let a flow run that waits for approval go on: this process runs the rest of it."""
    decide(ctx, _run_id(ctx, run_id), approved=True, comment=comment, tools=tools)


@runs_app.command("reject")
def reject_run(
    ctx: typer.Context,
    run_id: str = typer.Argument(
        ..., help="A flow run waiting for approval (frun_…), or a unique prefix."
    ),
    comment: str | None = typer.Option(None, "--comment", help="Recorded with the decision."),
) -> None:
    """Reject a flow run that waits for approval: it ends cancelled, outcome rejected."""
    decide(ctx, _run_id(ctx, run_id), approved=False, comment=comment, tools=[])


@flows_app.command("prune")
def prune(
    ctx: typer.Context,
    older_than_days: float = typer.Option(
        7.0, "--older-than-days", min=0.0, max=36_500.0, help="Runs that ended this long ago."
    ),
) -> None:
    """Delete the LangGraph checkpoints of flow runs that ended (the store keeps their
    steps, outputs and transitions). Needed only with retention='keep'."""
    n = runtime_for(ctx, []).prune(older_than=datetime.now(UTC) - timedelta(days=older_than_days))
    out.print(f"deleted the checkpoints of {n} ended run(s)")
