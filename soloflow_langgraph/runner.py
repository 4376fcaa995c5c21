"""Run a registered flow: inputs checked, every step reported, the run recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import FlowRunError, FlowValidationError
from soloflow_core.flow.executors import ExecutorRegistry
from soloflow_core.generalize.arguments import extract_inputs
from soloflow_core.models import FlowDefinition, FlowStep, StepRecord, ToolCall
from soloflow_langgraph.compiler import compile_flow

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.store import Store

log = logging.getLogger(__name__)

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


@dataclass(slots=True)
class FlowRunResult:
    run_id: str | None
    flow: str
    status: str  # completed | failed
    output: Any
    results: dict[str, Any]
    errors: dict[str, str]
    steps: list[ToolCall] = field(default_factory=list)
    duration_ms: float = 0.0


def check_inputs(flow: FlowDefinition, inputs: dict[str, Any]) -> None:
    """Required inputs present and of the declared JSON type; names the input at fault."""
    schema = flow.input_schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    problems: list[tuple[str | None, str | None, str]] = []
    for name in schema.get("required") or []:
        if name not in inputs:
            problems.append((None, f"inputs.{name}", f"required input {name!r} is missing"))
    for name, value in inputs.items():
        spec = props.get(name)
        if spec is None:
            if props:
                problems.append((None, f"inputs.{name}", f"unknown input {name!r}; the flow takes: {', '.join(props)}"))
            continue
        jtype = spec.get("type")
        ok = _JSON_TYPES.get(jtype) if isinstance(jtype, str) else None
        if ok and (not isinstance(value, ok) or (jtype in ("integer", "number") and isinstance(value, bool))):
            problems.append((None, f"inputs.{name}", f"expected {jtype}, got {type(value).__name__} {value!r}"))
    if problems:
        lines = "\n  ".join(f"flow {flow.name!r}, field {f!r}: {m}" for _, f, m in problems)
        raise FlowValidationError("invalid flow inputs:\n  " + lines, flow=flow.name, field=problems[0][1], problems=problems)


def inputs_from_task(flow: FlowDefinition, task: str) -> dict[str, Any]:
    """The flow's inputs recovered from a task text by its learned extraction rules."""
    return extract_inputs(flow.extraction, task)


def run_flow(
    flow: FlowDefinition,
    inputs: dict[str, Any],
    *,
    tools: Sequence[Any] = (),
    plugin_manager: pluggy.PluginManager | None = None,
    registry: ExecutorRegistry | None = None,
    store: Store | None = None,
    user_id: str = "default",
    agent_id: str = "default",
    raise_on_failure: bool = False,
) -> FlowRunResult:
    """Run ``flow`` once with no model call; record it in ``store`` when given.

    Raises:
        FlowValidationError: the flow or the inputs are invalid (nothing is run).
        FlowRunError: with ``raise_on_failure``, a step failed.
    """
    check_inputs(flow, inputs)
    steps: list[ToolCall] = []
    run_id: str | None = None
    pm = plugin_manager

    def on_step(step: FlowStep, call: ToolCall, index: int) -> None:
        steps.append(call)
        if pm is not None and pm.hook.soloflow_step_finished.get_hookimpls():
            try:
                pm.hook.soloflow_step_finished(
                    step=StepRecord(run_id=run_id or "", user_id=user_id, agent_id=agent_id,
                                    index=index, call=call, source="flow")
                )
            except Exception:
                log.exception("a soloflow_step_finished plugin failed")

    graph = compile_flow(flow, tools=tools, plugin_manager=pm, registry=registry, on_step=on_step)
    if store is not None:
        run_id = store.start_flow_run(flow, inputs, user_id=user_id, agent_id=agent_id)
    start = time.perf_counter()
    try:
        state = graph.invoke({"inputs": inputs, "results": {}, "errors": {}})
    except Exception as exc:
        step_id = getattr(exc, "step", None) or _failed_step(flow, steps)
        err = f"step {step_id!r}: {type(exc).__name__}: {exc}"
        if store is not None and run_id is not None:
            store.finish_flow_run(run_id, status="failed", error=err)
        result = FlowRunResult(run_id, flow.name, "failed", None, {}, {str(step_id): str(exc)}, steps,
                               (time.perf_counter() - start) * 1000)
        if raise_on_failure:
            raise FlowRunError(f"flow {flow.name!r} failed at {err}", flow=flow.name, step=step_id, cause=exc) from exc
        return result
    results = dict(state.get("results") or {})
    errors = dict(state.get("errors") or {})
    output = results.get(flow.result_step)
    if store is not None and run_id is not None:
        store.finish_flow_run(run_id, status="completed", outputs={"output": output, "errors": errors})
    return FlowRunResult(run_id, flow.name, "completed", output, results, errors, steps,
                         (time.perf_counter() - start) * 1000)


def _failed_step(flow: FlowDefinition, steps: list[ToolCall]) -> str | None:
    for call in reversed(steps):
        if call.error:
            for s in flow.steps:
                if s.skill_key == call.name:
                    return s.id
    return None
