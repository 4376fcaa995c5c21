"""Compile a :class:`FlowDefinition` into a LangGraph graph.

One node per step; dependency edges (several dependencies make a fan-in barrier);
independent steps run in the same superstep. A map step (``map_over``) fans out with one
LangGraph ``Send`` per item and collects the outputs, in item order, into a list. Step
inputs are rendered from ``input_map`` templates against the flow inputs and earlier
outputs. Each step node retries its own call (``retry_max``, ``retry_backoff`` doubled each
time; any exception but a template error) under ``timeout_seconds``, records every attempt
in the run's step journal, and applies its ``on_failure`` policy (see
:data:`soloflow_core.models.flows.OnFailure`). A flow with ``requires_approval`` gets an
approval gate before its first side-effecting steps; a flow with compensations ends in a
final node that runs them when a step asked for it. The nodes are in :mod:`.nodes`.

LangGraph's own ``RetryPolicy``/``timeout`` are not used: its timeouts cover async nodes
only, and its ``error_handler`` bypasses fan-in barriers (see LANGCHAIN_NOTES).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph

from soloflow_core.flow.executors import ExecutorRegistry, build_executor_registry
from soloflow_core.flow.validate import validate_flow
from soloflow_core.models import FlowDefinition, FlowStep, ToolCall
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.compile.nodes import (
    FANOUT_SUFFIX,
    FINAL_NODE,
    GATE_NODE,
    ITEM_SUFFIX,
    ApprovalGate,
    Collect,
    Finalize,
    FlowContext,
    MapFanOut,
    StepNode,
    StepSpec,
)
from soloflow_langgraph.compile.state import FlowState, flow_state_schema
from soloflow_langgraph.compile.step_call import ExecutorInfo, inspect_executor

if TYPE_CHECKING:
    import pluggy
    from langgraph.graph.state import CompiledStateGraph

log = logging.getLogger(__name__)

__all__ = ["build_flow_graph", "compile_flow", "flow_mermaid", "side_effecting"]


def side_effecting(step: FlowStep, info: ExecutorInfo | None) -> bool:
    """Whether ``step`` changes the world: its own ``side_effects``, else its tool's
    metadata, else yes (unknown counts as side-effecting)."""
    if step.side_effects is not None:
        return step.side_effects
    if info is not None and info.read_only is not None:
        return not info.read_only
    return True


def _guarded_steps(flow: FlowDefinition, infos: dict[str, ExecutorInfo]) -> list[str]:
    """The side-effecting steps with no side-effecting step upstream: the gate goes before them."""
    by_id = {s.id: s for s in flow.steps}
    effect = {s.id: side_effecting(s, infos.get(s.id)) for s in flow.steps}
    memo: dict[str, bool] = {}

    def upstream_effect(sid: str) -> bool:
        if sid not in memo:
            memo[sid] = any(effect[d] or upstream_effect(d) for d in by_id[sid].depends_on)
        return memo[sid]

    return [s.id for s in flow.steps if effect[s.id] and not upstream_effect(s.id)]


def build_flow_graph(
    flow: FlowDefinition,
    registry: ExecutorRegistry,
    *,
    on_step: Callable[[FlowStep, ToolCall, int], None] | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """The (uncompiled) ``StateGraph`` of ``flow``; validates it against ``registry`` first."""
    plan = validate_flow(flow, executors=registry.keys())
    # Every node reads the flow's own schema, given (not inferred from its annotation, which
    # would bring back the channels the flow does not use).
    schema = flow_state_schema(flow)
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(schema, context_schema=FlowContext)
    order = {sid: i for i, sid in enumerate(plan.order)}
    specs: dict[str, StepSpec] = {}
    for step in flow.steps:
        executor = registry.get(step.skill_key)
        spec = StepSpec(
            flow=flow,
            step=step,
            executor=executor,
            info=inspect_executor(executor),
            index=order[step.id],
            on_step=on_step,
        )
        if step.compensation is not None:
            spec.comp_executor = registry.get(step.compensation.skill_key)
            spec.comp_info = inspect_executor(spec.comp_executor)
        specs[step.id] = spec
        node = StepNode(spec)
        if step.map_over is None:
            graph.add_node(step.id, node, input_schema=schema)
            continue
        fanout, item = step.id + FANOUT_SUFFIX, step.id + ITEM_SUFFIX
        graph.add_node(fanout, _noop, input_schema=schema)
        graph.add_node(item, node, input_schema=schema)
        graph.add_node(step.id, Collect(step), input_schema=schema)
        graph.add_conditional_edges(fanout, MapFanOut(flow, step), [item, step.id])
        graph.add_edge(item, step.id)
    deps_of = {s.id: list(dict.fromkeys(s.depends_on)) for s in flow.steps}
    if flow.requires_approval:
        guarded = _guarded_steps(flow, {k: v.info for k, v in specs.items()})
        if guarded:
            gate_deps = sorted({d for g in guarded for d in deps_of[g]}, key=order.__getitem__)
            graph.add_node(GATE_NODE, ApprovalGate(flow, guarded), input_schema=schema)
            _add_edges(graph, gate_deps, GATE_NODE)
            for g in guarded:
                deps_of[g] = [*deps_of[g], GATE_NODE]
    for step in flow.steps:
        entry = step.id + FANOUT_SUFFIX if step.map_over is not None else step.id
        _add_edges(graph, deps_of[step.id], entry)
    has_dependents = {d for s in flow.steps for d in s.depends_on}
    sinks = [s.id for s in flow.steps if s.id not in has_dependents]
    if any(s.compensation is not None for s in flow.steps):
        graph.add_node(FINAL_NODE, Finalize(flow, specs), input_schema=schema)
        _add_edges(graph, sinks, FINAL_NODE)
        graph.add_edge(FINAL_NODE, END)
    else:  # nothing to compensate: no extra superstep (and checkpoint) per run
        for sink in sinks:
            graph.add_edge(sink, END)
    return graph


def _add_edges(graph: StateGraph[Any, Any, Any, Any], deps: list[str], target: str) -> None:
    if not deps:
        graph.add_edge(START, target)
    elif len(deps) == 1:
        graph.add_edge(deps[0], target)
    else:
        graph.add_edge(deps, target)  # a fan-in barrier: waits for every dependency


def _noop(state: FlowState) -> dict[str, Any]:
    return {}


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

    Invoke it with ``{"inputs": {...}}``; the outputs are in ``["results"][step_id]``. For
    a durable run pass ``context=FlowContext(journal=...)`` (what
    :class:`~soloflow_langgraph.runtime.flow_runtime.FlowRuntime` does) and a checkpointer.

    Raises:
        FlowValidationError: the flow is invalid (names the step and field).
        ExecutorNotFoundError: a step's ``skill_key`` has no executor.
    """
    if registry is None:
        pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
        registry = build_executor_registry(pm, tools=tools)
    graph = build_flow_graph(flow, registry, on_step=on_step)
    compiled = graph.compile(checkpointer=checkpointer, name=_graph_name(flow))
    # LangGraph stops a run after 25 supersteps by default; a flow needs at most one per
    # step, plus the map fan-outs, the approval gate and the final node.
    return compiled.with_config(recursion_limit=max(25, 3 * len(flow.steps) + 10))


def _graph_name(flow: FlowDefinition) -> str:
    return "flow:" + "".join(c if c.isalnum() or c in "_-" else "_" for c in flow.name)[:60]


def flow_mermaid(flow: FlowDefinition) -> str:
    """LangGraph's Mermaid diagram of ``flow``; needs no executors (nothing is run)."""
    registry = ExecutorRegistry()
    for step in flow.steps:
        keys = [step.skill_key] + ([step.compensation.skill_key] if step.compensation else [])
        for key in keys:
            if key not in registry:
                registry.register(key, _not_run)
    return (
        build_flow_graph(flow, registry).compile(name=_graph_name(flow)).get_graph().draw_mermaid()
    )


def _not_run(**_: Any) -> None:  # pragma: no cover - placeholder for drawing only
    raise RuntimeError("placeholder executor: this graph was built for drawing only")
