"""How an invocation of a flow run ended, as a :class:`FlowRunResult`: the graph's final
state (or the exception it raised) read into a status and an outcome, the run's end recorded
through the runtime's ``finish``, and the outcome counted in the flow's record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError, SoloFlowError
from soloflow_core.flow.fsm import RunState
from soloflow_core.learning.records import record_flow_outcome
from soloflow_core.store.flowruns import APPROVAL_STEP
from soloflow_langgraph.runtime.results import FlowRunResult, RunOutcome
from soloflow_langgraph.runtime.support import handoff_text

if TYPE_CHECKING:
    from soloflow_core.flow.journal import StepJournal
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store import Store

__all__ = ["Finish", "failed_result", "record_outcome", "state_result"]

log = logging.getLogger(__name__)

Finish = Callable[..., None]
"""Records the run's end: ``finish(state, outcome=..., error=..., outputs=...)``."""


def failed_result(
    flow: FlowDefinition,
    exc: Exception,
    *,
    common: dict[str, Any],
    journal: StepJournal,
    finish: Finish,
) -> FlowRunResult:
    """The run failed with ``exc`` raised out of its graph: recorded ``failed``; the steps
    that completed come from the journal (the graph's state went with the exception).
    ``common``: ``run_id``, ``flow``, ``steps`` and ``duration_ms`` of the result."""
    step_id = getattr(exc, "step", None)
    err = f"{type(exc).__name__}: {exc}" if step_id is None else str(exc)
    finish(RunState.FAILED, error=err, outcome="failed")
    done = {
        sid: out
        for key, sid, out in journal.completed_order()
        if key == sid and sid != APPROVAL_STEP  # the gate's answer is no step's output
    }
    return FlowRunResult(
        status="failed",
        outcome="failed",
        results=done,
        errors={str(step_id): str(exc)},
        failed_step=step_id,
        error=err,
        **common,
    )


def state_result(
    flow: FlowDefinition,
    state: Any,
    *,
    common: dict[str, Any],
    journal: StepJournal,
    finish: Finish,
) -> FlowRunResult:
    """The result of the graph's final ``state``: waiting (an approval asked: the journal's
    deferred completions written now), cancelled or rejected, fallback (with the hand-off
    text), compensated, or completed — each but waiting recorded through ``finish``.
    ``common``: ``run_id``, ``flow``, ``steps`` and ``duration_ms`` of the result."""
    results = dict(state.get("results") or {})
    errors = dict(state.get("errors") or {})
    common = {
        **common,
        "results": results,
        "errors": errors,
        "skipped": dict(state.get("skipped") or {}),
    }
    if "__interrupt__" in state:
        journal.flush()  # the deferred completions: the run waits, maybe for days
        payloads = [getattr(i, "value", i) for i in state["__interrupt__"]]
        return FlowRunResult(
            status="waiting",
            outcome=None,
            interrupt=payloads[0] if payloads else None,
            **common,
        )
    halt = state.get("halt") or {}
    kind = halt.get("kind")
    output = results.get(flow.result_step)
    if kind in ("cancelled", "rejected"):
        finish(
            RunState.CANCELLED,
            outcome=kind,
            error=halt.get("error"),
            outputs={"results": results},
        )
        return FlowRunResult(status="cancelled", outcome=kind, **common)
    if kind == "fallback":
        handoff = handoff_text(flow, halt, results=results, errors=errors)
        finish(
            RunState.FAILED,
            outcome="fallback",
            error=halt.get("error"),
            outputs={"results": results, "handoff": handoff},
        )
        return FlowRunResult(
            status="fallback",
            outcome="fallback",
            handoff=handoff,
            failed_step=halt.get("step"),
            error=halt.get("error"),
            **common,
        )
    if kind == "compensate":
        comp_errors = dict(state.get("compensation_errors") or {})
        outcome: RunOutcome = "compensated" if not comp_errors else "compensation_failed"
        err = str(halt.get("error")) + (
            "" if not comp_errors else "; " + "; ".join(comp_errors.values())
        )
        finish(
            RunState.FAILED,
            outcome=outcome,
            error=err,
            outputs={"results": results, "compensation_errors": comp_errors},
        )
        return FlowRunResult(
            status="failed", outcome=outcome, failed_step=halt.get("step"), error=err, **common
        )
    finish(
        RunState.COMPLETED,
        outcome="completed",
        outputs={"output": output, "errors": errors},
    )
    return FlowRunResult(status="completed", outcome="completed", output=output, **common)


def record_outcome(
    store: Store | None,
    result: FlowRunResult,
    *,
    ns: dict[str, str],
    config: LearningConfig,
) -> None:
    """Count an ended run of a registered flow in its record (``ns``: its ``user_id`` and
    ``agent_id``): ``completed`` succeeded, ``failed`` and ``fallback`` failed; a cancelled
    run (a person's act) and one that waits are not outcomes. Never raises."""
    success = {"completed": True, "failed": False, "fallback": False}.get(result.status)
    if store is None or success is None:
        return
    try:
        record_flow_outcome(
            store,
            result.flow,
            success=success,
            user_id=ns["user_id"],
            agent_id=ns["agent_id"],
            config=config,
        )
    except NotFoundError:
        return  # a flow run by its definition, never registered: no record to keep
    except SoloFlowError:
        log.exception("recording the outcome of flow run %r failed", result.run_id)
