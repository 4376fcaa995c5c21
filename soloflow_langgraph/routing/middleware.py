"""``create_agent`` middleware: offer learned flows to the agent, and run a confident one for it.

:class:`SoloFlowMiddleware` does three things for a LangChain 1.x agent:

- **hints** (every model call, ``wrap_model_call``/``awrap_model_call``): the flows of the
  (user, agent) namespace that fit the task (:meth:`ProceduralMemory.find_workflow`, only
  flows whose every tool the agent has) are offered: their tools stay in the request, and
  the design document's hint joins the system prompt — ``A deterministic flow '…' is
  available for this pattern. Use flow_run('…') instead of reasoning through these steps
  manually.``;
- **routing** (once per invocation, ``before_agent``): with ``auto_execute`` and a best match
  that :func:`may_auto_execute` allows, the flow runs directly — inputs from the task text
  by its extraction rules — and its output is the agent's final ``AIMessage``: no model
  call. A flow that fails (``failed``/``fallback``) loses confidence and the agent runs as
  usual, told what the flow did (the runtime's handoff text);
- **learning**: :attr:`SoloFlowMiddleware.callbacks` captures each run into the store, and
  the :class:`~soloflow_core.learning.service.LearningService` turns repeated ones into
  candidates and flows; every flow run (routed, or called as a tool) goes through a
  durable :class:`~soloflow_langgraph.runtime.flow_runtime.FlowRuntime` whose outcomes it records.

Middleware tools are fixed when the agent is built (``create_agent`` adds them to its tool
node then), so the middleware declares at construction one typed tool per flow the
namespace holds, plus ``flow_run(name, inputs)``, which runs any flow of the namespace —
flows learned later are reachable through it. Per model call, the request's tools are
narrowed to the flows that match the task. For agents SoloFlow does not build,
:func:`flow_hints` gives the tools and the hint text as plain objects.

Example::

    mw = SoloFlowMiddleware(store, user_id="alice", agent_id="support", tools=TOOLS,
                            config=LearningConfig(auto_execute=True))
    agent = create_agent(model, tools=TOOLS, middleware=[mw])
    agent.invoke({"messages": [("user", task)]}, config={"callbacks": mw.callbacks})
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, hook_config
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool

from soloflow_core.errors import SoloFlowError
from soloflow_core.learning import LearningConfig, may_auto_execute
from soloflow_core.learning.service import LearningService
from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE, WorkflowMatch
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.routing.hints import FLOW_RUN_TOOL, OfferedFlows, output_text
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.runtime.inputs import apply_input_defaults, check_inputs, inputs_from_task

if TYPE_CHECKING:
    import pluggy
    from langchain.agents.middleware import ModelResponse
    from langgraph.runtime import Runtime

    from soloflow_core.models import FlowCandidate
    from soloflow_core.store import Store
    from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

__all__ = ["DEFAULT_ROUTE_MIN_SCORE", "SoloFlowMiddleware"]

log = logging.getLogger(__name__)

DEFAULT_ROUTE_MIN_SCORE = 0.4
"""A task is routed to a flow only when the match's score (``WorkflowMatch.score``) is at
least this: a loose text match gets a hint, never a run without the model."""


def _task_of(messages: Sequence[Any]) -> tuple[str, int]:
    """(the first human message's text, how many human messages there are)."""
    humans = [m for m in messages if getattr(m, "type", None) == "human"]
    if not humans:
        return "", 0
    content = humans[0].content
    if isinstance(content, list):
        content = "".join(
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        )
    return (content if isinstance(content, str) else str(content)), len(humans)


class SoloFlowState(AgentState[Any]):
    """The agent state with this middleware's per-invocation notes (private)."""

    soloflow: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


# --------------------------------------------------------------------------- the middleware


class SoloFlowMiddleware(AgentMiddleware[SoloFlowState, Any, Any]):
    """Learned flows for a ``create_agent`` agent: hints, tools, routing, learning.

    Args:
        store: the SoloFlow store (runs, flows, flow runs).
        user_id, agent_id: the namespace; nothing of another namespace is ever offered.
        tools: the agent's tools (the same list given to ``create_agent``): flows run them,
            and flows needing any other tool are not offered.
        config: learning settings (``auto_execute``, ``confidence_threshold``,
            ``suggestion_mode``, ...); default ``LearningConfig()``.
        runtime: the ``FlowRuntime`` flows run on (yours to close); default one on
            ``store`` with ``tools`` and ``plugin_manager``, closed by :meth:`close`. Its
            ``on_finished`` is chained to record outcomes.
        learning: the learning service; default one on ``store`` with ``config``, replay
            verification and the tools' ``read_only``/``side_effects`` metadata.
        plugin_manager: hears ``soloflow_flow_promoted`` and the capture hooks, gives the
            default runtime its executors and ``soloflow_step_finished``; the learning service
            registers on it. Default: a fresh ``get_plugin_manager()``.
        route_min_score: the match score a task needs to be routed to a flow.
        min_confidence: flows below it are neither offered nor routed.
        max_flows: at most this many flows offered per task.
    """

    state_schema = SoloFlowState

    def __init__(
        self,
        store: Store,
        *,
        user_id: str = "default",
        agent_id: str = "default",
        tools: Sequence[Any] = (),
        config: LearningConfig | None = None,
        runtime: FlowRuntime | None = None,
        learning: LearningService | None = None,
        plugin_manager: pluggy.PluginManager | None = None,
        route_min_score: float = DEFAULT_ROUTE_MIN_SCORE,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        max_flows: int = 3,
    ) -> None:
        super().__init__()
        self.store, self.user_id, self.agent_id = store, user_id, agent_id
        self.config = config or LearningConfig()
        self.pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
        if learning is None:
            effects = _tool_side_effects(tools)
            learning = LearningService(
                store,
                self.config,
                self.pm,
                verify=_replay_verifier(store, effects),
                side_effects=effects,
            )
        self.learning = learning
        if not self.pm.is_registered(learning):
            self.pm.register(learning)
        self.route_min_score = route_min_score
        self._owns_runtime = runtime is None
        if runtime is None:
            runtime = FlowRuntime(
                store,
                tools=[t for t in tools if not isinstance(t, str)],
                plugin_manager=self.pm,
                user_id=user_id,
                agent_id=agent_id,
            )
        self._runtime = runtime
        self.flows = OfferedFlows(
            store,
            user_id=user_id,
            agent_id=agent_id,
            tools=tools,
            runtime=runtime,
            learning=learning,
            pm=self.pm,
            min_confidence=min_confidence,
            limit=max_flows,
        )
        typed = self.flows.typed_tools()
        self._typed = {str((t.metadata or {}).get("soloflow_flow")): t.name for t in typed}
        self.tools = [*typed, self.flows.flow_run_tool()]
        self._own = {t.name for t in self.tools}
        self._handler: SoloFlowCallbackHandler | None = None

    @property
    def runtime(self) -> FlowRuntime:
        return self._runtime

    def close(self) -> None:
        """Close the ``FlowRuntime`` this middleware opened (not one it was given)."""
        if self._owns_runtime:
            self._runtime.close()

    @property
    def callbacks(self) -> list[Any]:
        """``[handler]`` capturing each run into the store (and so into learning): pass as
        ``config={"callbacks": mw.callbacks}`` or ``agent.with_config(callbacks=...)``."""
        if self._handler is None:
            from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

            self._handler = SoloFlowCallbackHandler(
                store=self.store,
                user_id=self.user_id,
                agent_id=self.agent_id,
                plugin_manager=self.pm,
            )
        return [self._handler]

    # ------------------------------------------------------------------ before the agent

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: SoloFlowState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Find the flows for the task; run the best one directly when it may run unasked."""
        task, humans = _task_of(state.get("messages") or [])
        matches = self.flows.find(task)
        note: dict[str, Any] = {"flows": [m.name for m in matches], "handoff": None, "routed": None}
        if matches and humans == 1 and self.config.auto_execute:
            routed = self._route(task, matches[0], note)
            if routed is not None:
                return routed
        return {"soloflow": note}

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(
        self, state: SoloFlowState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def _route(self, task: str, best: WorkflowMatch, note: dict[str, Any]) -> dict[str, Any] | None:
        if best.score < self.route_min_score or best.status != "active":
            return None
        try:
            if not may_auto_execute(
                self.learning.stats(self.user_id, self.agent_id, best.name), self.config
            ):
                return None
            flow = self.flows.definition(best.name)
            inputs = apply_input_defaults(flow, inputs_from_task(flow, task))
            check_inputs(flow, inputs)
        except SoloFlowError as exc:  # inputs not in the task, flow gone: the agent does it
            log.info("SoloFlow: not routing to %r: %s", best.name, exc)
            return None
        result = self.flows.run(flow, inputs)  # the runtime records the outcome
        note["routed"] = {"flow": flow.name, "run_id": result.run_id, "status": result.status}
        if result.status == "completed":
            message = AIMessage(
                content=output_text(result.output),
                response_metadata={
                    "soloflow_flow": flow.name,
                    "soloflow_flow_version": flow.version,
                    "soloflow_run_id": result.run_id,
                },
            )
            return {"messages": [message], "jump_to": "end", "soloflow": note}
        note["handoff"] = result.handoff or (
            f"The deterministic flow {flow.name!r} failed at step {result.failed_step!r} "
            f"({result.error}); do the task yourself."
        )
        note["flows"] = [n for n in note["flows"] if n != flow.name]
        return None if result.status == "waiting" else {"soloflow": note}

    # ------------------------------------------------------------------ each model call

    def _prepare(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state: Any = request.state
        note: dict[str, Any] | None = state.get("soloflow") if isinstance(state, dict) else None
        if note is None:  # before_agent did not run (a resumed thread): look up now
            task, _ = _task_of(request.messages)
            note = {"flows": [m.name for m in self.flows.find(task)], "handoff": None}
        names = list(note.get("flows") or [])
        offered = {self._typed[n] for n in names if n in self._typed}
        if names:
            offered.add(FLOW_RUN_TOOL)
        tools = [
            t
            for t in request.tools
            if not isinstance(t, BaseTool) or t.name not in self._own or t.name in offered
        ]
        extra = []
        if names:
            extra.append(self.flows.hint(names, self._typed))
        if note.get("handoff"):
            extra.append(str(note["handoff"]))
        extra = [e for e in extra if e]
        if not extra:
            return request.override(tools=tools)
        base = request.system_message.content if request.system_message is not None else ""
        base_text = base if isinstance(base, str) else output_text(base)
        system = SystemMessage(content="\n\n".join([base_text, *extra]).strip())
        return request.override(system_message=system, tools=tools)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._prepare(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(await asyncio.to_thread(self._prepare, request))


def _tool_side_effects(tools: Sequence[Any]) -> dict[str, bool]:
    """Tool name → side effects, from each LangChain tool's ``metadata``."""
    out: dict[str, bool] = {}
    for t in tools:
        meta = getattr(t, "metadata", None)
        name = getattr(t, "name", None)
        if not isinstance(meta, dict) or not isinstance(name, str):
            continue
        if isinstance(meta.get("side_effects"), bool):
            out[name] = meta["side_effects"]
        elif isinstance(meta.get("read_only"), bool):
            out[name] = not meta["read_only"]
    return out


def _replay_verifier(
    store: Store, side_effects: dict[str, bool]
) -> Callable[[FlowCandidate], FlowCandidate]:
    def verify(cand: FlowCandidate) -> FlowCandidate:
        from soloflow_langgraph.verify import verify_candidate

        updated, _ = verify_candidate(
            store,
            cand.id,
            user_id=cand.user_id,
            agent_id=cand.agent_id,
            side_effects=side_effects or None,
        )
        return updated

    return verify
