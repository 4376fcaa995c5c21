"""Compile a :class:`FlowDefinition` into a LangGraph graph.

One node per step; dependency edges (several dependencies make a fan-in barrier);
independent steps run in the same superstep. A map step (``map_over``) fans out with one
LangGraph ``Send`` per item and collects the outputs, in item order, into a list. Step inputs are rendered from ``input_map``
templates against the flow inputs and earlier outputs. ``retry_max``/``retry_backoff``
become a ``RetryPolicy`` that retries any exception except template errors (a missing
field does not appear by retrying). A step with ``on_failure="continue"`` retries inside
its own node and, when out of attempts, records its error and lets the run go on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, Send

from soloflow_core.errors import FlowRunError
from soloflow_core.flow.executors import ExecutorRegistry, build_executor_registry
from soloflow_core.flow.templates import TemplateError, render
from soloflow_core.flow.validate import ITEM, validate_flow
from soloflow_core.models import FlowDefinition, FlowStep, ToolCall

if TYPE_CHECKING:
    import pluggy
    from langgraph.graph.state import CompiledStateGraph

log = logging.getLogger(__name__)

FANOUT_SUFFIX = "__fanout"
ITEM_SUFFIX = "__item"
"""A map step ``s`` is three nodes: ``s__fanout`` (waits for the dependencies, then sends
one ``s__item`` task per item), ``s__item`` (one call) and ``s`` (collects the list)."""


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for keys that parallel steps write to."""
    return {**(left or {}), **(right or {})}


def merge_map_parts(
    left: dict[str, dict[int, Any]] | None, right: dict[str, dict[int, Any]] | None
) -> dict[str, dict[int, Any]]:
    """Reducer for the per-item outputs of map steps (step id → item index → output)."""
    out = {k: dict(v) for k, v in (left or {}).items()}
    for k, v in (right or {}).items():
        out.setdefault(k, {}).update(v)
    return out


class FlowState(TypedDict, total=False):
    """The state of a compiled flow."""

    inputs: dict[str, Any]
    results: Annotated[dict[str, Any], merge_dicts]
    errors: Annotated[dict[str, str], merge_dicts]
    map_parts: Annotated[dict[str, dict[int, Any]], merge_map_parts]
    """Per map step, each item's output until the step collects them into a list."""
    map_item: Any
    """Only in a map item's ``Send`` payload: the item."""
    map_index: int
    """Only in a map item's ``Send`` payload: the item's position."""


class StepInputError(FlowRunError):
    """A step's inputs could not be rendered (not retried)."""


def call_executor(executor: Any, kwargs: dict[str, Any]) -> Any:
    """Run a LangChain tool / Runnable (``invoke``) or a plain callable (keyword args)."""
    if hasattr(executor, "invoke") and not isinstance(executor, type):
        out = executor.invoke(kwargs)
    else:
        out = executor(**kwargs)
    content = getattr(out, "content", None)
    if content is not None and type(out).__name__ == "ToolMessage":
        return content
    return out


def _retryable(exc: BaseException) -> bool:
    return not isinstance(exc, StepInputError | TemplateError)


class _StepNode:
    """The callable LangGraph runs for one step."""

    def __init__(
        self,
        flow: FlowDefinition,
        step: FlowStep,
        executor: Any,
        on_step: Callable[[FlowStep, ToolCall, int], None] | None,
        index: int,
    ) -> None:
        self.flow, self.step, self.executor, self.on_step, self.index = flow, step, executor, on_step, index
        self.__name__ = step.id

    def _render(self, state: Mapping[str, Any]) -> dict[str, Any]:
        results = state.get("results") or {}
        if "map_index" in state:
            results = {**results, ITEM: state.get("map_item")}
        try:
            kwargs = render(self.step.input_map, inputs=state.get("inputs") or {}, results=results)
        except TemplateError as exc:
            raise StepInputError(
                f"flow {self.flow.name!r}, step {self.step.id!r}: cannot render input_map: {exc}",
                flow=self.flow.name, step=self.step.id, cause=exc,
            ) from exc
        if not isinstance(kwargs, dict):
            raise StepInputError(f"flow {self.flow.name!r}, step {self.step.id!r}: input_map must render to an object")
        return kwargs

    def _attempt(self, kwargs: dict[str, Any]) -> Any:
        start = time.perf_counter()
        error = True
        out: Any = None
        try:
            out = call_executor(self.executor, kwargs)
            error = False
            return out
        except Exception as exc:
            out = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if self.on_step is not None:
                call = ToolCall(
                    name=self.step.skill_key, args=kwargs, output=out, error=error,
                    duration_ms=(time.perf_counter() - start) * 1000,
                )
                self.on_step(self.step, call, self.index)

    def _done(self, state: Mapping[str, Any], out: Any) -> dict[str, Any]:
        if "map_index" in state:
            return {"map_parts": {self.step.id: {int(state["map_index"]): out}}}
        return {"results": {self.step.id: out}}

    def _where(self, state: Mapping[str, Any]) -> str:
        return f"{self.step.id}[{state['map_index']}]" if "map_index" in state else self.step.id

    def __call__(self, state: FlowState) -> dict[str, Any]:
        kwargs = self._render(state)
        if self.step.on_failure != "continue":
            return self._done(state, self._attempt(kwargs))
        delay = self.step.retry_backoff
        for attempt in range(self.step.retry_max + 1):
            try:
                return self._done(state, self._attempt(kwargs))
            except Exception as exc:
                if attempt == self.step.retry_max:
                    log.warning("flow %r step %r failed, continuing: %s", self.flow.name, self._where(state), exc)
                    return {"errors": {self._where(state): f"{type(exc).__name__}: {exc}"}}
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")


class _MapFanOut:
    """The conditional edge of a map step: one ``Send`` per item of ``map_over``."""

    def __init__(self, flow: FlowDefinition, step: FlowStep) -> None:
        self.flow, self.step = flow, step
        self.__name__ = f"{step.id}{FANOUT_SUFFIX}"

    def __call__(self, state: FlowState) -> list[Send | str]:
        assert self.step.map_over is not None
        try:
            items = render(self.step.map_over, inputs=state.get("inputs") or {},
                           results=state.get("results") or {})
        except TemplateError as exc:
            raise StepInputError(
                f"flow {self.flow.name!r}, step {self.step.id!r}, field 'map_over': {exc}",
                flow=self.flow.name, step=self.step.id, cause=exc,
            ) from exc
        if not isinstance(items, list | tuple):
            raise StepInputError(
                f"flow {self.flow.name!r}, step {self.step.id!r}, field 'map_over': "
                f"{self.step.map_over} is a {type(items).__name__}, not a list; point it at a list",
                flow=self.flow.name, step=self.step.id,
            )
        if not items:
            return [self.step.id]
        base = {"inputs": state.get("inputs") or {}, "results": state.get("results") or {}}
        return [Send(self.step.id + ITEM_SUFFIX, {**base, "map_item": x, "map_index": k})
                for k, x in enumerate(items)]


class _Collect:
    """A map step's last node: the items' outputs, in item order, as the step's output."""

    def __init__(self, step_id: str) -> None:
        self.step_id = self.__name__ = step_id

    def __call__(self, state: FlowState) -> dict[str, Any]:
        parts = (state.get("map_parts") or {}).get(self.step_id, {})
        n = max(parts, default=-1) + 1
        return {"results": {self.step_id: [parts.get(k) for k in range(n)]}}


def _noop(state: FlowState) -> dict[str, Any]:
    return {}


def build_flow_graph(
    flow: FlowDefinition,
    registry: ExecutorRegistry,
    *,
    on_step: Callable[[FlowStep, ToolCall, int], None] | None = None,
) -> StateGraph:
    """The (uncompiled) ``StateGraph`` of ``flow``; validates it against ``registry`` first."""
    plan = validate_flow(flow, executors=registry.keys())
    graph = StateGraph(FlowState)
    order = {sid: i for i, sid in enumerate(plan.order)}
    for step in flow.steps:
        kwargs: dict[str, Any] = {}
        if step.retry_max and step.on_failure != "continue":
            kwargs["retry_policy"] = RetryPolicy(
                max_attempts=step.retry_max + 1,
                initial_interval=step.retry_backoff,
                backoff_factor=2.0,
                jitter=False,
                retry_on=_retryable,
            )
        node = _StepNode(flow, step, registry.get(step.skill_key), on_step, order[step.id])
        if step.map_over is None:
            graph.add_node(step.id, node, **kwargs)
            continue
        fanout, item = step.id + FANOUT_SUFFIX, step.id + ITEM_SUFFIX
        graph.add_node(fanout, _noop)
        graph.add_node(item, node, **kwargs)
        graph.add_node(step.id, _Collect(step.id))
        graph.add_conditional_edges(fanout, _MapFanOut(flow, step), [item, step.id])
        graph.add_edge(item, step.id)
    has_dependents = {d for s in flow.steps for d in s.depends_on}
    for step in flow.steps:
        deps = list(dict.fromkeys(step.depends_on))
        entry = step.id + FANOUT_SUFFIX if step.map_over is not None else step.id
        if not deps:
            graph.add_edge(START, entry)
        elif len(deps) == 1:
            graph.add_edge(deps[0], entry)
        else:
            graph.add_edge(deps, entry)
    for step in flow.steps:
        if step.id not in has_dependents:
            graph.add_edge(step.id, END)
    return graph


def compile_flow(
    flow: FlowDefinition,
    *,
    tools: Sequence[Any] = (),
    plugin_manager: pluggy.PluginManager | None = None,
    registry: ExecutorRegistry | None = None,
    checkpointer: Any = None,
    on_step: Callable[[FlowStep, ToolCall, int], None] | None = None,
) -> CompiledStateGraph:
    """Validate ``flow`` and compile it into a runnable LangGraph graph.

    Args:
        flow: the definition.
        tools: LangChain tools (or callables) that steps may name as ``skill_key`` — usually
            the agent's own tools; the built-in ``tool_executor`` plugin registers them.
        plugin_manager: where executors come from (``soloflow_register_executors``).
        registry: a ready executor registry (then ``tools``/``plugin_manager`` are unused).
        checkpointer: a LangGraph checkpointer, for durable runs.
        on_step: called after every step attempt with the step, the call record and the
            step's position (the runner fires ``soloflow_step_finished`` from it).

    Invoke it with ``{"inputs": {...}}``; the outputs are in ``["results"][step_id]``.

    Raises:
        FlowValidationError: the flow is invalid (names the step and field).
        ExecutorNotFoundError: a step's ``skill_key`` has no executor.
    """
    if registry is None:
        registry = build_executor_registry(plugin_manager, tools=tools)
    graph = build_flow_graph(flow, registry, on_step=on_step)
    return graph.compile(checkpointer=checkpointer, name=_graph_name(flow))


def _graph_name(flow: FlowDefinition) -> str:
    return "flow:" + "".join(c if c.isalnum() or c in "_-" else "_" for c in flow.name)[:60]


def flow_mermaid(flow: FlowDefinition) -> str:
    """LangGraph's Mermaid diagram of ``flow``; needs no executors (nothing is run)."""
    registry = ExecutorRegistry()
    for step in flow.steps:
        if step.skill_key not in registry:
            registry.register(step.skill_key, _not_run)
    return build_flow_graph(flow, registry).compile(name=_graph_name(flow)).get_graph().draw_mermaid()


def _not_run(**_: Any) -> None:  # pragma: no cover - placeholder for drawing only
    raise RuntimeError("placeholder executor: this graph was built for drawing only")
