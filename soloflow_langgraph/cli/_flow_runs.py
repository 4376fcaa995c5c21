"""A flow run from the command line: its runtime, its report, the answer to its approval.

Shared by ``soloflow flows run|resume|...`` and ``soloflow flows runs approve|reject``
(:mod:`.flowrun_cmd`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.cli._tool_specs import load_tools
from soloflow_langgraph.cli.app import INTERRUPTED_EXIT, Context, err, out, print_json

if TYPE_CHECKING:
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
    from soloflow_langgraph.runtime.results import FlowRunResult

__all__ = ["decide", "interruptible", "report_result", "runtime_for"]


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _ignore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except ValueError:  # not the main thread
            return


@contextmanager
def interruptible(runtime: FlowRuntime, run_id: Callable[[], str | None]) -> Iterator[None]:
    """Ctrl-C (SIGINT) or SIGTERM while a flow run goes on: the runtime stops waiting for it
    (its in-progress call is abandoned, nothing more is scheduled) and records the run as
    ``interrupted``; the command says which call was left running and how to resume the run,
    then ends the process with exit code 130 at once — no traceback, no wait for the
    abandoned calls.
    ``run_id`` gives the run's id once it is known (None before the run was recorded)."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: leave SIGTERM alone
        previous = None
    try:
        yield
    except KeyboardInterrupt:
        _ignore_signals()  # a second Ctrl-C must not cut this short with a traceback
        rid = run_id()
        if rid is None:
            err.print("interrupted before the flow run was recorded: nothing ran.", highlight=False)
        else:
            left = runtime.interrupted_call(rid)
            # The runtime recorded it when its invocation was interrupted; this covers an
            # interrupt that came just before or after the invocation (it writes nothing then).
            runtime.record_interrupted(rid)
            ended = _ended_state(runtime, rid)
            if ended is not None:  # the signal came as the run ended: say what it is
                err.print(
                    f"interrupted: flow run {rid} had already ended ({ended}); nothing to resume."
                    f"\n  see it with: soloflow flows status {rid}",
                    highlight=False,
                    markup=False,
                )
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(INTERRUPTED_EXIT)
            err.print(
                f"interrupted: flow run {rid} stopped and recorded as interrupted"
                + (
                    f"; {left} was still running and is abandoned (its result is not used)"
                    if left
                    else ""
                )
                + f".\n  resume it with: soloflow flows resume {rid}",
                highlight=False,
                markup=False,
            )
        # Exit now: the interrupted invocation's threads (LangGraph's pool, the abandoned
        # call) must not hold the process until their calls return, nor print tracebacks as
        # the interpreter shuts their executors down. Nothing is lost: every completed step
        # is in the run's checkpoints and journal (SQLite and PostgreSQL roll back what was
        # in flight), and `flows resume` carries on from there.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(INTERRUPTED_EXIT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _ended_state(runtime: FlowRuntime, run_id: str) -> str | None:
    """The state of ``run_id`` when it has ended (``completed``, ``failed``…), else None
    (also when the store cannot say)."""
    try:
        rec = runtime.status(run_id)
    except Exception:  # the store is gone: the message says what was meant to happen
        return None
    return str(rec.state) if rec.terminal else None


def runtime_for(ctx: typer.Context, tools: list[str]) -> FlowRuntime:
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    c: Context = ctx.obj
    runtime = FlowRuntime(
        c.store(),
        tools=[t for spec in tools for t in load_tools(spec)],
        plugin_manager=get_plugin_manager(),
        learning_config=c.learning_config(),
        **c.ns,
    )
    # Closed when the command ends: the queued checkpoint deletions finish first.
    ctx.call_on_close(runtime.close)
    return runtime


def report_result(result: FlowRunResult, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "run_id": result.run_id,
                "flow": result.flow,
                "status": result.status,
                "outcome": result.outcome,
                "output": result.output,
                "results": result.results,
                "errors": result.errors,
                "skipped": result.skipped,
                "handoff": result.handoff,
                "interrupt": result.interrupt,
                "failed_step": result.failed_step,
                "error": result.error,
                "duration_ms": result.duration_ms,
            }
        )
    elif result.status == "completed":
        out.print(f"completed: {result.output!r}")
    elif result.status == "waiting":
        question = (result.interrupt or {}).get("question", "approval needed")
        out.print(
            f"[yellow]waiting for approval[/]: {question}\n"
            f"  soloflow flows runs approve {result.run_id}   |   soloflow flows runs reject {result.run_id}",
            highlight=False,
        )
    elif result.status == "fallback":
        out.print(f"[yellow]fallback[/]: {result.handoff}")
    elif result.status == "cancelled":
        out.print(
            "[yellow]cancelled[/]"
            + (f" ({result.outcome})" if result.outcome != "cancelled" else "")
            + (f": {result.error}" if result.error and result.error != "cancelled" else "")
        )
    else:
        out.print(
            f"[red]{result.status}[/] ({result.outcome}) at step {result.failed_step!r}: {result.error}"
        )
    if result.status not in ("completed", "waiting"):
        raise typer.Exit(1)


def decide(
    ctx: typer.Context, run_id: str, *, approved: bool, comment: str | None, tools: list[str]
) -> None:
    """`flows runs approve|reject RUN_ID`: answer a run waiting for approval."""
    runtime = runtime_for(ctx, tools)
    with interruptible(runtime, lambda: run_id):
        result = runtime.approve(run_id, approved=approved, comment=comment)
    if not approved:
        out.print(f"rejected {run_id}: cancelled")
        return
    report_result(result, False)
