"""Run a registered flow: inputs checked, every step reported, the run recorded."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import FlowRunError, FlowValidationError
from soloflow_core.flow.executors import ExecutorRegistry
from soloflow_core.generalize.arguments import extract_inputs
from soloflow_core.models import FlowDefinition, ToolCall

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
    """How a flow run ended (or paused).

    ``status``: ``completed``; ``failed``; ``fallback`` (the flow hands the task back to
    the agent: read ``handoff``); ``cancelled`` (cancelled, or its approval rejected);
    ``waiting`` (paused for approval: ``interrupt`` holds the question).
    ``state`` is the run's state-machine state.
    """

    run_id: str | None
    flow: str
    status: str
    output: Any
    results: dict[str, Any]
    errors: dict[str, str]
    steps: list[ToolCall] = field(default_factory=list)
    duration_ms: float = 0.0
    state: str | None = None
    outcome: str | None = None
    handoff: str | None = None
    interrupt: Any = None
    skipped: dict[str, str] = field(default_factory=dict)
    failed_step: str | None = None
    error: str | None = None


def apply_input_defaults(flow: FlowDefinition, inputs: dict[str, Any]) -> dict[str, Any]:
    """``inputs`` with the ``default`` of every ``input_schema`` property not given."""
    props: dict[str, Any] = (flow.input_schema or {}).get("properties") or {}
    missing = {k: v["default"] for k, v in props.items()
               if k not in inputs and isinstance(v, dict) and "default" in v}
    return {**missing, **inputs} if missing else inputs


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
    """Run ``flow`` once with no model call; recorded (and durable) in ``store`` when given.

    A shortcut for ``FlowRuntime(store, ...).run(flow, inputs)``; a flow that
    ``requires_approval`` returns with status ``waiting``.

    Raises:
        FlowValidationError: the flow or the inputs are invalid (nothing is run).
        FlowRunError: with ``raise_on_failure``, the run did not complete.
    """
    from soloflow_langgraph.runtime import FlowRuntime

    checkpointer: Any = None if store is not None or flow.requires_approval else False
    with FlowRuntime(store, tools=tools, plugin_manager=plugin_manager, registry=registry,
                     user_id=user_id, agent_id=agent_id, checkpointer=checkpointer) as runtime:
        result = runtime.run(flow, inputs)
    if raise_on_failure and result.status not in ("completed", "waiting"):
        raise FlowRunError(
            f"flow {flow.name!r} {result.status} at step {result.failed_step!r}: {result.error}",
            flow=flow.name, step=result.failed_step,
        )
    return result
