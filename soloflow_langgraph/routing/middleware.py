"""``create_agent`` middleware: offer learned flows to the agent, and run one for it when the
request is that flow's job.

:class:`SoloFlowMiddleware` does four things for a LangChain 1.x agent:

- **hints** (every model call): the flows of the (user, agent) namespace that fit the task
  (:meth:`~soloflow_core.memory.procedural.ProceduralMemory.find_workflow`, only flows whose
  every tool the agent has) are offered: their tools stay in the request and the design
  document's hint joins the system prompt;
- **routing** (once per invocation, ``before_agent``): with ``auto_execute``, a flow runs
  with no model call only when :func:`~soloflow_core.memory.router.decide_route` says the
  request is its job — its words match the evidence of the job (the task texts of the runs
  it was learned from; a user-submitted flow's own description and keywords), no negation,
  no other action or person, every required input bound from the request itself — and the
  flow's record allows it. The user gets a reply built without a model call (the flow's
  ``reply_template``, learned from the agent's own answers, or a statement of what was
  done). A run that waits for a person's approval ends the invocation with a reply saying
  so; a run that fails hands the task to the agent, told what happened;
- **guarding side effects** (every tool call): while a run of a flow of the namespace waits
  for a person's approval (in this invocation or any other), the agent's calls to that
  flow's side-effecting tools, and to any flow that would repeat one of them, are refused,
  and a request for the same job is answered that it waits (no second run); within one model
  turn, a call that would repeat a side-effecting step another call of the turn does (the
  flow's own tool, or a second flow with the same step) is refused — approving the waiting
  run does its steps once;
- **learning**: the middleware's hooks capture each run of its agent into the store
  (:mod:`.capture`, through the handler of :attr:`SoloFlowMiddleware.callbacks`); the
  :class:`~soloflow_core.learning.service.LearningService` turns repeated runs into
  candidates and flows, and credits flows whose job the agent did itself
  (:func:`~soloflow_core.learning.records.record_agent_run`). Every flow run (routed, or
  called as a tool) goes through a durable
  :class:`~soloflow_langgraph.runtime.flow_runtime.FlowRuntime` of the same namespace, which
  records its outcome.

Middleware tools are fixed when the agent is built, so the middleware declares one typed
tool per flow the namespace holds, plus ``flow_run(name, inputs)`` for flows learned later.
Reference: ``docs/agents.md``.

Example::

    mw = SoloFlowMiddleware(store, user_id="alice", agent_id="support", tools=TOOLS,
                            config=LearningConfig(auto_execute=True))
    agent = create_agent(model, tools=TOOLS, middleware=[mw])
    agent.invoke({"messages": [("user", task)]})  # captured by the middleware's own hooks
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, hook_config
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from soloflow_core.errors import ConfigError, SoloFlowError
from soloflow_core.flow.effects import tool_side_effects
from soloflow_core.generalize.reply import render_reply
from soloflow_core.learning import LearningConfig
from soloflow_core.learning.service import LearningService
from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE
from soloflow_core.memory.router import RouteDecision, decide_route
from soloflow_core.models import FlowDefinition
from soloflow_core.models.names import check_namespace
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph._messages import task_of
from soloflow_langgraph.routing.capture import HookCapture, capture_id
from soloflow_langgraph.routing.hints import FLOW_RUN_TOOL, RUNS_SEEN, OfferedFlows, output_text
from soloflow_langgraph.routing.tools import refused_call, waiting_text
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.runtime.results import FlowRunResult

if TYPE_CHECKING:
    import pluggy
    from langchain.agents.middleware import ModelResponse
    from langchain.agents.middleware.types import ToolCallRequest
    from langgraph.runtime import Runtime

    from soloflow_core.store import Store
    from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

__all__ = ["SoloFlowMiddleware", "task_of"]

log = logging.getLogger(__name__)

ToolResult = ToolMessage | Command[Any]


class SoloFlowState(AgentState[Any]):
    """The agent state with this middleware's per-invocation notes (private)."""

    soloflow: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    soloflow_capture: NotRequired[Annotated[str | None, PrivateStateAttr]]
    """The id of the task run this invocation is captured as (None: a handler passed in
    ``config["callbacks"]`` captures it)."""


# --------------------------------------------------------------------------- the middleware


class SoloFlowMiddleware(AgentMiddleware[SoloFlowState, Any, Any]):
    """Learned flows for a ``create_agent`` agent: hints, tools, routing, guards, learning.

    Args:
        store: the SoloFlow store (runs, flows, flow runs).
        user_id: the namespace's user; nothing of another namespace is ever offered. No
            id holds a control character (else ``InvalidNameError``).
        agent_id: the namespace's agent.
        tools: the agent's tools (the same list given to ``create_agent``): flows run them,
            and flows needing any other tool are not offered. Their LangChain ``metadata``
            (``side_effects`` / ``read_only``) says which change the world; a tool that
            says nothing is taken to.
        config: learning settings (``auto_execute``, ``confidence_threshold``,
            ``suggestion_mode``, ...); default ``LearningConfig()``.
        runtime: the ``FlowRuntime`` flows run on (yours to close); default one on
            ``store`` with ``tools`` and ``plugin_manager``, closed by :meth:`close`.
        learning: the learning service; default one on ``store`` with ``config``, replay
            verification and the tools' side-effect metadata.
        plugin_manager: hears ``soloflow_flow_promoted`` and the capture hooks, gives the
            default runtime its executors and ``soloflow_step_finished``; the learning service
            registers on it. Default: a fresh ``get_plugin_manager()``.
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
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        max_flows: int = 3,
    ) -> None:
        super().__init__()
        check_namespace(user_id, agent_id)
        self.store, self.user_id, self.agent_id = store, user_id, agent_id
        self.config = config or LearningConfig()
        self.pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
        self.side_effects = tool_side_effects(tools)
        if learning is None:
            from soloflow_langgraph.verify import replay_verifier

            learning = LearningService(
                store,
                self.config,
                self.pm,
                verify=replay_verifier(store, self.side_effects),
                side_effects=self.side_effects,
            )
        self.learning = learning
        if not self.pm.is_registered(learning):
            self.pm.register(learning)
        self._owns_runtime = runtime is None
        if runtime is not None and (runtime.user_id, runtime.agent_id) != (user_id, agent_id):
            raise ConfigError(
                f"SoloFlowMiddleware for user {user_id!r}, agent {agent_id!r} was given a "
                f"FlowRuntime of user {runtime.user_id!r}, agent {runtime.agent_id!r}: its runs "
                "and outcomes would be recorded in another namespace. Give it a runtime built "
                "with the same user_id and agent_id."
            )
        if runtime is None:
            runtime = FlowRuntime(
                store,
                tools=[t for t in tools if not isinstance(t, str)],
                plugin_manager=self.pm,
                user_id=user_id,
                agent_id=agent_id,
                learning_config=self.config,
            )
        self._runtime = runtime
        self.flows = OfferedFlows(
            store,
            user_id=user_id,
            agent_id=agent_id,
            tools=tools,
            runtime=runtime,
            pm=self.pm,
            min_confidence=min_confidence,
            limit=max_flows,
            learning_config=self.config,
        )
        typed = self.flows.typed_tools()
        self._typed = {str((t.metadata or {}).get("soloflow_flow")): t.name for t in typed}
        self._flow_of_tool = {tool: flow for flow, tool in self._typed.items()}
        self.tools = [*typed, self.flows.flow_run_tool()]
        self._own = {t.name for t in self.tools}
        self._handler: SoloFlowCallbackHandler | None = None
        self._capture: HookCapture | None = None

    @property
    def runtime(self) -> FlowRuntime:
        return self._runtime

    def close(self) -> None:
        """Close the ``FlowRuntime`` this middleware opened (not one it was given)."""
        if self._owns_runtime:
            self._runtime.close()

    @property
    def callbacks(self) -> list[Any]:
        """``[handler]``: the handler the middleware captures its agent's runs with. Not
        needed in ``config`` (the middleware's hooks report to it); passing it there, or any
        SoloFlow handler on the same store, records each run once, through the callbacks
        (which also see calls the hooks do not, such as a routed flow's tool calls)."""
        if self._handler is None:
            from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

            self._handler = SoloFlowCallbackHandler(
                store=self.store,
                user_id=self.user_id,
                agent_id=self.agent_id,
                plugin_manager=self.pm,
            )
        return [self._handler]

    # ------------------------------------------------------------------ routing

    def route(self, task: str) -> RouteDecision:
        """The routing decision for ``task`` (what ``before_agent`` would do, without
        running anything): every matching flow's verdict and reasons."""
        matches = self.flows.find(task)
        return decide_route(
            self.store,
            task,
            matches,
            user_id=self.user_id,
            agent_id=self.agent_id,
            config=self.config,
            definition=self.flows.definition,
            stats=lambda name: self.learning.stats(self.user_id, self.agent_id, name),
        )

    @property
    def _hooks(self) -> HookCapture:
        if self._capture is None:
            self._capture = HookCapture(self.callbacks[0])
        return self._capture

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: SoloFlowState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Open the invocation's task run; find the flows for the task; run one with no
        model call when the task is its job."""
        root = self._hooks.start(list(state.get("messages") or []))
        try:
            update = self._route_or_note(state)
        except BaseException as exc:
            if root is not None:
                self._hooks.fail(root, exc)
            raise
        return {**(update or {}), "soloflow_capture": root}

    def after_agent(self, state: SoloFlowState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the invocation's task run (its answer is the last message)."""
        root = state.get("soloflow_capture")
        if root:
            self._hooks.finish(root, list(state.get("messages") or []))
        return None

    async def aafter_agent(
        self, state: SoloFlowState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)

    def _route_or_note(self, state: SoloFlowState) -> dict[str, Any] | None:
        task, humans = task_of(state.get("messages") or [])
        matches = self.flows.find(task)
        note: dict[str, Any] = {
            "flows": [m.name for m in matches],
            "handoff": None,
            "routed": None,
            "waiting": self._waiting_in_store(),
        }
        if matches and humans == 1 and self.config.auto_execute:
            try:
                decision = decide_route(
                    self.store,
                    task,
                    matches,
                    user_id=self.user_id,
                    agent_id=self.agent_id,
                    config=self.config,
                    definition=self.flows.definition,
                    stats=lambda name: self.learning.stats(self.user_id, self.agent_id, name),
                )
            except SoloFlowError:
                log.exception("SoloFlow: routing failed; the agent does the task")
                return {"soloflow": note}
            log.info("SoloFlow routing: %s", decision.reason)
            if decision.run is not None:
                return self._run_routed(task, decision, note)
        return {"soloflow": note}

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(
        self, state: SoloFlowState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def _waiting_in_store(self) -> list[dict[str, Any]]:
        """The namespace's runs waiting for approval, each with its flow's side-effecting
        tools (what nobody may do meanwhile)."""
        try:
            waiting = self.store.waiting_flow_runs(user_id=self.user_id, agent_id=self.agent_id)
        except SoloFlowError:
            log.exception("SoloFlow: reading the runs waiting for approval failed")
            return []
        out = []
        for run_id, name in waiting:
            try:
                flow = self.flows.definition(name)
            except SoloFlowError:  # a flow deleted since: guard nothing of it
                continue
            out.append({"flow": name, "run_id": run_id, "tools": sorted(self._effect_tools(flow))})
        return out

    def _run_routed(
        self, task: str, decision: RouteDecision, note: dict[str, Any]
    ) -> dict[str, Any] | None:
        assert decision.run is not None
        try:
            flow = self.flows.definition(decision.run)
        except SoloFlowError as exc:  # the flow vanished: the agent does it
            log.info("SoloFlow: not routing to %r: %s", decision.run, exc)
            return {"soloflow": note}
        effects = self._effect_tools(flow)
        pending = [w for w in note.get("waiting") or [] if set(w["tools"]) & effects]
        if pending:  # the job waits for a person already: never a second run
            w = pending[0]
            meta = {
                "soloflow_flow": w["flow"],
                "soloflow_run_id": w["run_id"],
                "soloflow_status": "waiting",
            }
            message = AIMessage(
                content=waiting_text(w["flow"], w["run_id"]), response_metadata=meta
            )
            return {"messages": [message], "jump_to": "end", "soloflow": note}
        try:
            result = self.flows.run(flow, decision.inputs)
        except (
            SoloFlowError
        ) as exc:  # the flow vanished, its inputs were refused: the agent does it
            log.info("SoloFlow: not routing to %r: %s", decision.run, exc)
            return {"soloflow": note}
        note["routed"] = {"flow": flow.name, "run_id": result.run_id, "status": result.status}
        meta = {
            "soloflow_flow": flow.name,
            "soloflow_flow_version": flow.version,
            "soloflow_run_id": result.run_id,
            "soloflow_status": result.status,
        }
        if result.status == "completed":
            reply = render_reply(
                flow, decision.inputs, results=result.results, output=result.output
            )
            message = AIMessage(content=reply, response_metadata=meta)
            return {"messages": [message], "jump_to": "end", "soloflow": note}
        if result.status == "waiting":
            note["waiting"] = [*(note.get("waiting") or []), self._waiting_note(flow, result)]
            message = AIMessage(
                content=waiting_text(flow.name, result.run_id), response_metadata=meta
            )
            return {"messages": [message], "jump_to": "end", "soloflow": note}
        note["handoff"] = result.handoff or (
            f"The deterministic flow {flow.name!r} {result.status} at step {result.failed_step!r} "
            f"({result.error}); do the task yourself."
        )
        note["flows"] = [n for n in note["flows"] if n != flow.name]
        return {"soloflow": note}

    def _waiting_note(self, flow: FlowDefinition, result: FlowRunResult) -> dict[str, Any]:
        return {
            "flow": flow.name,
            "run_id": result.run_id,
            "tools": sorted(self._effect_tools(flow)),
        }

    def _effect_tools(self, flow: FlowDefinition) -> set[str]:
        """The tools of ``flow``'s steps that change the world (unknown: they do)."""
        return {
            s.skill_key
            for s in flow.steps
            if s.side_effects is True
            or (s.side_effects is None and self.side_effects.get(s.skill_key, True))
        }

    # ------------------------------------------------------------------ each model call

    def _prepare(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state: Any = request.state
        note: dict[str, Any] | None = state.get("soloflow") if isinstance(state, dict) else None
        if note is None:  # before_agent did not run (a resumed thread): look up now
            task, _ = task_of(request.messages)
            note = {"flows": [m.name for m in self.flows.find(task)], "handoff": None}
        waiting = list(note.get("waiting") or [])
        held = {w["flow"] for w in waiting}
        names = [n for n in note.get("flows") or [] if n not in held]
        offered = {self._typed[n] for n in names if n in self._typed}
        if names:
            offered.add(FLOW_RUN_TOOL)
        blocked = {t for w in waiting for t in w.get("tools") or ()}
        tools = [
            t
            for t in request.tools
            if not isinstance(t, BaseTool)
            or (t.name not in blocked and (t.name not in self._own or t.name in offered))
        ]
        extra = []
        if names:
            extra.append(self.flows.hint(names, self._typed))
        if note.get("handoff"):
            extra.append(str(note["handoff"]))
        extra += [waiting_text(w["flow"], w["run_id"]) for w in waiting]
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
        request = self._prepare(request)
        root = capture_id(request.state)
        if root is None:
            return handler(request)
        call = self._hooks.model_started(root, request)
        try:
            response = handler(request)
        except BaseException as exc:
            self._hooks.call_failed(root, call, exc, tool=False)
            raise
        self._hooks.model_ended(root, call, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        request = await asyncio.to_thread(self._prepare, request)
        root = capture_id(request.state)
        if root is None:
            return await handler(request)
        call = self._hooks.model_started(root, request)
        try:
            response = await handler(request)
        except BaseException as exc:
            self._hooks.call_failed(root, call, exc, tool=False)
            raise
        self._hooks.model_ended(root, call, response)
        return response

    # ------------------------------------------------------------------ each tool call

    def _flow_called(self, call: Any) -> str | None:
        """The flow a tool call runs (a typed flow tool, or ``flow_run``), if any."""
        name = call.get("name") if isinstance(call, dict) else None
        if name == FLOW_RUN_TOOL:
            args = call.get("args") or {}
            return args.get("name") if isinstance(args.get("name"), str) else None
        return self._flow_of_tool.get(str(name))

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        """A refusal when the call would do a side-effecting step of a flow whose run waits
        for approval, or one that another call of the same model turn does."""
        call = request.tool_call
        tool = str(call.get("name") or "")
        state: Any = request.state
        note = state.get("soloflow") if isinstance(state, dict) else None
        mine = self._call_effects(call)
        for w in (note or {}).get("waiting") or []:
            if mine & set(w.get("tools") or ()):
                return refused_call(
                    call,
                    f"Refused: {tool} would do a step of the flow {w['flow']!r}, "
                    f"whose run {w['run_id']} waits for a person's approval; "
                    "it does that step once approved.",
                )
        messages = state.get("messages") if isinstance(state, dict) else None
        last = messages[-1] if messages else None
        for other in getattr(last, "tool_calls", None) or ():
            if other.get("id") == call.get("id"):
                break  # only the calls before this one in the turn
            shared = mine & self._call_effects(other)
            if shared:
                return refused_call(
                    call,
                    f"Refused: {tool} would do {', '.join(sorted(shared))} "
                    f"again: {other.get('name')} does it in this turn.",
                )
        return None

    def _call_effects(self, call: Any) -> set[str]:
        """The side-effecting tools a tool call would call: its flow's, or itself."""
        flow_name = self._flow_called(call)
        if flow_name is None:
            name = str(call.get("name") or "")
            return {name} if self.side_effects.get(name, True) and name not in self._own else set()
        try:
            return self._effect_tools(self.flows.definition(flow_name))
        except SoloFlowError:
            return set()

    def _after_flow_call(
        self,
        request: ToolCallRequest,
        response: ToolResult,
        seen: list[tuple[FlowDefinition, FlowRunResult]],
    ) -> ToolResult:
        """Note the runs a flow tool call left waiting: later calls are guarded."""
        state: Any = request.state
        note = dict(state.get("soloflow") or {}) if isinstance(state, dict) else {}
        waiting = [self._waiting_note(f, r) for f, r in seen if r.status == "waiting"]
        if not waiting or not isinstance(response, ToolMessage):
            return response
        note["waiting"] = [*(note.get("waiting") or []), *waiting]
        return Command(update={"messages": [response], "soloflow": note})

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        root = capture_id(request.state)
        if root is None:
            return self._guarded_tool_call(request, handler)
        call = self._hooks.tool_started(root, request)
        try:
            response = self._guarded_tool_call(request, handler)
        except BaseException as exc:
            self._hooks.call_failed(root, call, exc, tool=True)
            raise
        self._hooks.tool_ended(root, call, response)
        return response

    def _guarded_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        if self._flow_called(request.tool_call) is None:
            return handler(request)
        seen: list[tuple[FlowDefinition, FlowRunResult]] = []
        token = RUNS_SEEN.set(seen)
        try:
            response = handler(request)
        finally:
            RUNS_SEEN.reset(token)
        return self._after_flow_call(request, response, seen)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        root = capture_id(request.state)
        if root is None:
            return await self._aguarded_tool_call(request, handler)
        call = self._hooks.tool_started(root, request)
        try:
            response = await self._aguarded_tool_call(request, handler)
        except BaseException as exc:
            self._hooks.call_failed(root, call, exc, tool=True)
            raise
        self._hooks.tool_ended(root, call, response)
        return response

    async def _aguarded_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        refusal = await asyncio.to_thread(self._refusal, request)
        if refusal is not None:
            return refusal
        if self._flow_called(request.tool_call) is None:
            return await handler(request)
        seen: list[tuple[FlowDefinition, FlowRunResult]] = []
        token = RUNS_SEEN.set(seen)
        try:
            response = await handler(request)
        finally:
            RUNS_SEEN.reset(token)
        return await asyncio.to_thread(self._after_flow_call, request, response, seen)
