"""Flows offered to an agent: the hint text, the flows' tools, and :func:`flow_hints`.

:func:`flow_hints` is for an agent SoloFlow did not build: the tools of the flows that fit a
task and the hint text to put in its prompt. :class:`OfferedFlows` is what it and
:class:`~soloflow_langgraph.routing.middleware.SoloFlowMiddleware` share: the namespace's
flows for one agent, looked up, offered as tools and run durably.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from soloflow_core.errors import NotFoundError, SoloFlowError
from soloflow_core.learning.quality import flows_quality, order_ties_by_quality
from soloflow_core.learning.records import FLOW_RUN_TOOL
from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE, ProceduralMemory, WorkflowMatch
from soloflow_core.models import FlowDefinition
from soloflow_langgraph.routing.tools import flow_tool, flow_tool_name, waiting_text
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.runtime.inputs import apply_input_defaults
from soloflow_langgraph.runtime.results import FlowRunResult

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.store import Store

__all__ = ["FLOW_RUN_TOOL", "OfferedFlows", "flow_hint", "flow_hints", "output_text"]

log = logging.getLogger(__name__)


_MAX_OUTPUT = 16_000


def flow_hint(name: str, tool: str | None = None, inputs: Sequence[str] = ()) -> str:
    """The design document's hint for one flow (the detector writes the same sentence into
    ``FlowCandidate.agent_prompt_hint``), with the flow's tool and inputs when known."""
    text = (
        f"A deterministic flow '{name}' is available for this pattern. Use "
        f"flow_run('{name}') instead of reasoning through these steps manually."
    )
    if tool:
        text += f" Its tool: {tool}."
    if inputs:
        text += f" Inputs: {', '.join(inputs)}."
    return text


def _inputs_of(flow: FlowDefinition) -> list[str]:
    return list(((flow.input_schema or {}).get("properties") or {}).keys())


def output_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_OUTPUT else text[:_MAX_OUTPUT] + "…"


class _FlowRunArgs(BaseModel):
    name: str = Field(description="The flow's name, as the hint gives it.")
    inputs: dict[str, Any] | None = Field(default=None, description="The flow's inputs by name.")


# --------------------------------------------------------------------------- running flows


RUNS_SEEN: contextvars.ContextVar[list[tuple[FlowDefinition, FlowRunResult]] | None] = (
    contextvars.ContextVar("soloflow_runs_seen", default=None)
)
"""When set (to a list), :meth:`OfferedFlows.run` appends each run's flow and result to it:
how the middleware learns, around a tool call, what the flow tools it offered did."""


class OfferedFlows:
    """The namespace's flows for one agent: lookup, tools and durable runs.

    Runs go through ``runtime`` when one is given (its owner closes it). Without one, each
    run opens a :class:`FlowRuntime` on ``store`` with ``pm`` and closes it when the run
    returns, so that nothing stays open between runs. Either way the runtime records each
    run's outcome in the flow's record.
    """

    def __init__(
        self,
        store: Store,
        *,
        user_id: str,
        agent_id: str,
        tools: Sequence[Any],
        runtime: FlowRuntime | None,
        pm: pluggy.PluginManager | None,
        min_confidence: float,
        limit: int,
        learning_config: LearningConfig | None = None,
    ) -> None:
        self.store, self.user_id, self.agent_id = store, user_id, agent_id
        self.agent_tools = [t for t in tools if not isinstance(t, str)]
        self.tool_names = {
            t if isinstance(t, str) else getattr(t, "name", getattr(t, "__name__", ""))
            for t in tools
        }
        self.memory = ProceduralMemory(store)
        self.min_confidence, self.limit = min_confidence, limit
        self.pm, self.learning_config = pm, learning_config
        self.runtime = runtime

    def find(self, task: str) -> list[WorkflowMatch]:
        """Matching flows the agent can run (every tool available), best first; flows whose
        text scores tie are ordered by their quality (:mod:`soloflow_core.learning.quality`)."""
        if not task.strip():
            return []
        try:
            matches = self.memory.find_workflow(
                self.user_id,
                self.agent_id,
                task,
                available_tools=self.tool_names,
                min_confidence=self.min_confidence,
                limit=self.limit,
            )
            if any(
                a.text_score == b.text_score for a, b in zip(matches, matches[1:], strict=False)
            ):
                metas = [
                    self.store.get_flow_meta(
                        m.name, version=m.version, user_id=self.user_id, agent_id=self.agent_id
                    )
                    for m in matches
                ]
                quality = {
                    name: q.overall
                    for (name, _), q in flows_quality(
                        self.store, metas, user_id=self.user_id, agent_id=self.agent_id
                    ).items()
                }
                matches = order_ties_by_quality(matches, lambda m: quality.get(m.name))
            return matches
        except SoloFlowError:
            log.exception("SoloFlow: looking up flows failed; the agent goes on without hints")
            return []

    def definition(self, name: str) -> FlowDefinition:
        return self.store.get_flow(name, user_id=self.user_id, agent_id=self.agent_id).flow

    def run(self, flow: FlowDefinition, inputs: dict[str, Any]) -> FlowRunResult:
        """A durable run, outside any agent graph's context: the flow is its own LangGraph
        thread with the runtime's checkpointer, not a subgraph of the agent."""
        seen = RUNS_SEEN.get()
        result = contextvars.Context().run(self._run, flow, inputs)
        if seen is not None:
            seen.append((flow, result))
        return result

    def _run(self, flow: FlowDefinition, inputs: dict[str, Any]) -> FlowRunResult:
        if self.runtime is not None:
            return self.runtime.run(flow, inputs)
        with FlowRuntime(
            self.store,
            tools=self.agent_tools,
            plugin_manager=self.pm,
            user_id=self.user_id,
            agent_id=self.agent_id,
            learning_config=self.learning_config,
        ) as runtime:
            return runtime.run(flow, inputs)

    def typed_tools(self) -> list[BaseTool]:
        """One tool per flow the namespace holds now (that the agent can run)."""
        out: list[BaseTool] = []
        taken = set(self.tool_names) | {FLOW_RUN_TOOL}
        for meta in self.store.list_flow_meta(
            user_id=self.user_id, agent_id=self.agent_id, include_retired=False
        ):
            if not set(meta.skill_keys) <= self.tool_names:
                continue
            flow = self.definition(meta.name)
            name = flow_tool_name(flow)
            if name in taken:
                continue
            try:
                out.append(flow_tool(flow, name=name, run=self.run))
            except SoloFlowError:
                log.exception("SoloFlow: flow %r cannot be offered as a tool", meta.name)
                continue
            taken.add(name)
        return out

    def flow_run_tool(self) -> StructuredTool:
        """``flow_run(name, inputs)``: any flow of the namespace, registered before or after
        the agent was built."""

        def call(name: str, inputs: dict[str, Any] | None = None) -> str:
            try:
                flow = self.definition(name)
                meta = self.store.get_flow_meta(name, user_id=self.user_id, agent_id=self.agent_id)
            except NotFoundError as exc:
                raise ToolException(str(exc)) from None
            missing = [k for k in meta.skill_keys if k not in self.tool_names]
            if meta.status == "retired" or missing:
                why = (
                    "it is retired"
                    if meta.status == "retired"
                    else f"this agent lacks {', '.join(missing)}"
                )
                raise ToolException(f"flow {name!r} cannot run here: {why}")
            try:
                result = self.run(flow, apply_input_defaults(flow, dict(inputs or {})))
            except SoloFlowError as exc:
                raise ToolException(f"flow {name!r}: {exc}") from None
            if result.status == "completed":
                return output_text(result.output)
            if result.status == "fallback" and result.handoff:
                return result.handoff
            if result.status == "waiting":
                return waiting_text(flow.name, result.run_id)
            raise ToolException(
                f"flow {name!r} {result.status} at step {result.failed_step!r}: {result.error}"
            )

        async def acall(name: str, inputs: dict[str, Any] | None = None) -> str:
            return await asyncio.to_thread(call, name, inputs)

        return StructuredTool.from_function(
            func=call,
            coroutine=acall,
            name=FLOW_RUN_TOOL,
            args_schema=_FlowRunArgs,
            description="Run a deterministic SoloFlow flow by name with its inputs: the same "
            "tool calls every time, no reasoning needed. Use it when a hint names a flow.",
            handle_tool_error=True,
        )

    def hint(self, names: Sequence[str], typed: dict[str, str]) -> str:
        """The hint text for the flows ``names`` (``typed``: flow name → its tool's name)."""
        lines = []
        for name in names:
            try:
                inputs = _inputs_of(self.definition(name))
            except NotFoundError:
                continue
            lines.append(flow_hint(name, typed.get(name), inputs))
        return "\n".join(lines)


def flow_hints(
    store: Store,
    user_id: str,
    agent_id: str,
    task: str,
    available_tools: Sequence[Any],
    *,
    runtime: FlowRuntime | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    limit: int = 3,
) -> tuple[list[BaseTool], str]:
    """For an agent SoloFlow did not build: the tools of the flows that fit ``task`` and the
    hint text to put in its prompt. Pass the tools to your agent and the text to its system
    prompt; both are empty when nothing fits.

    Args:
        available_tools: the agent's tools (objects: the flows' steps call them; names only
            when ``runtime`` already knows the executors). Flows needing another tool are
            not offered.
        runtime: runs the flows (durable, recorded); yours to close. Without one, each run
            opens a ``FlowRuntime`` on ``store`` and closes it when the run ends: nothing
            stays open between calls.
        plugin_manager: executors and hooks of those runs (not used with ``runtime``);
            default a fresh ``get_plugin_manager()`` per run.

    Returns:
        ``(tools, hint_text)``: one typed tool per matching flow, then ``flow_run``.
    """
    flows = OfferedFlows(
        store,
        user_id=user_id,
        agent_id=agent_id,
        tools=available_tools,
        runtime=runtime,
        pm=plugin_manager,
        min_confidence=min_confidence,
        limit=limit,
    )
    matches = flows.find(task)
    if not matches:
        return [], ""
    tools: list[BaseTool] = []
    typed: dict[str, str] = {}
    taken = set(flows.tool_names) | {FLOW_RUN_TOOL}
    for m in matches:
        flow = flows.definition(m.name)
        name = flow_tool_name(flow)
        if name not in taken:
            tools.append(flow_tool(flow, name=name, run=flows.run))
            typed[m.name] = name
            taken.add(name)
    tools.append(flows.flow_run_tool())
    return tools, flows.hint([m.name for m in matches], typed)
