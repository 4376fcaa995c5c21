"""The trace of a sequential workflow: ``invoke_workflow`` (one per ``run`` or ``resume``) →
``phase`` (one per phase: the agent it ran, or the summarisation) → ``chat`` (each model call
of the phase, with its tokens and cost, priced as a captured agent's are). Recorded while
:class:`~soloflow_langgraph.sequential.workflow.SequentialWorkflow` drives the graph, exported
live when OpenTelemetry export is configured, and stored under the workflow's thread id when
the workflow has a store."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from uuid import UUID

from soloflow_core.ledger.tokens import token_usage
from soloflow_core.tracing import PriceTable, Span, SpanRecorder, active_listener, trace_id_for
from soloflow_langgraph.agent_trace import chat_attributes

if TYPE_CHECKING:
    import pluggy
    from langchain_core.runnables import RunnableConfig

    from soloflow_core.store import Store
    from soloflow_langgraph.sequential.models import WorkflowResult

__all__ = ["PhaseCalls", "WorkflowTrace", "current_phase", "traced_phase"]

log = logging.getLogger(__name__)

_TRACE: ContextVar[WorkflowTrace | None] = ContextVar("soloflow_workflow_trace", default=None)
_PHASE: ContextVar[PhaseCalls | None] = ContextVar("soloflow_workflow_phase", default=None)


def current_phase() -> PhaseCalls | None:
    """The traced phase running in this context (its model calls become its ``chat`` spans)."""
    return _PHASE.get()


class PhaseCalls:
    """The ``chat`` spans of one phase, keyed by LangChain run id (told by the phase's
    :class:`~soloflow_langgraph.sequential.budget.UsageMeter`)."""

    __slots__ = ("open", "span", "trace")

    def __init__(self, trace: WorkflowTrace, span: Span) -> None:
        self.trace, self.span = trace, span
        self.open: dict[UUID, Span] = {}

    def model_started(self, run_id: UUID, model: str | None) -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model:
            attrs["gen_ai.request.model"] = model
        self.open[run_id] = self.trace.recorder.start(
            f"chat {model}" if model else "chat", "chat", self.span, attrs
        )

    def model_ended(self, run_id: UUID, message: Any, error: str | None = None) -> None:
        span = self.open.pop(run_id, None)
        if span is None:
            return
        usage = token_usage(getattr(message, "usage_metadata", None))
        response_model = (getattr(message, "response_metadata", None) or {}).get("model_name")
        attrs = chat_attributes(self.trace.prices, span, usage=usage, response_model=response_model)
        self.trace.recorder.end(span, error=error, attributes=attrs)


class WorkflowTrace:
    """The spans of one invocation (``run`` or ``resume``) of a sequential workflow."""

    def __init__(
        self,
        thread_id: str,
        *,
        resumed: bool,
        prices: PriceTable,
        store: Store | None,
        user_id: str,
        agent_id: str,
        plugin_manager: pluggy.PluginManager | None,
    ) -> None:
        self.thread_id, self.prices, self.store = thread_id, prices, store
        self.user_id, self.agent_id = user_id, agent_id
        self.recorder = SpanRecorder(
            trace_id_for(thread_id), plugin_manager=plugin_manager, listener=active_listener()
        )
        self.root = self.recorder.start(
            "invoke_workflow sequential",
            "invoke_workflow",
            None,
            {
                "soloflow.workflow.thread_id": thread_id,
                "soloflow.workflow.resumed": resumed,
                "soloflow.namespace": f"{user_id}/{agent_id}",
            },
        )
        self._token = _TRACE.set(self)

    def phase(
        self,
        name: str,
        node: Callable[[Any, RunnableConfig], dict[str, Any]],
        state: Any,
        config: RunnableConfig,
    ) -> dict[str, Any]:
        """Run one phase's node under its ``phase`` span."""
        attrs: dict[str, Any] = {
            "soloflow.phase.name": name,
            "soloflow.phase.outer_iteration": state.get("outer_iteration", 0),
            "soloflow.phase.inner_iteration": state.get("inner_iteration", 0),
        }
        span = self.recorder.start(f"phase {name}", "phase", self.root, attrs)
        calls = PhaseCalls(self, span)
        token = _PHASE.set(calls)
        try:
            update = node(state, config)
        except BaseException as exc:
            for open_call in list(calls.open.values()):
                self.recorder.end(open_call, error=f"{type(exc).__name__}: {exc}")
            self.recorder.end(span, error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            _PHASE.reset(token)
        ended: dict[str, Any] = {}
        records = update.get("phase_history") or []
        if records and records[-1].get("compliance_score") is not None:
            ended["soloflow.phase.compliance_score"] = records[-1]["compliance_score"]
        if update.get("status") not in (None, "running"):
            ended["soloflow.workflow.status"] = update["status"]
        self.recorder.end(span, attributes=ended)
        return update

    def finish(self, result: WorkflowResult | None, error: str | None = None) -> list[Span]:
        """End the invocation's span (``error``: it raised; a failed workflow's reason else),
        store the spans under the thread id when there is a store; the spans."""
        _TRACE.reset(self._token)
        attrs: dict[str, Any] = {}
        if result is not None:
            attrs = {
                "soloflow.workflow.status": result.status,
                "soloflow.workflow.reason": result.reason,
            }
            if result.status == "failed":
                error = f"workflow failed: {result.reason}"
        self.root.attributes.update(attrs)
        self.recorder.close_open(error=error)  # phases left open (an interrupt), then the root
        spans = self.recorder.spans
        if self.store is not None:
            try:
                self.store.add_spans(
                    self.thread_id, spans, user_id=self.user_id, agent_id=self.agent_id
                )
            except Exception:
                log.exception("storing the trace of sequential workflow %r failed", self.thread_id)
        return spans


def traced_phase(
    name: str, node: Callable[[Any, RunnableConfig], dict[str, Any]]
) -> Callable[..., dict[str, Any]]:
    """``node`` as a graph node whose run is a ``phase`` span of the workflow trace running in
    its context (none: the node as it is)."""

    def phase(state: Any, config: RunnableConfig) -> dict[str, Any]:
        trace = _TRACE.get()
        if trace is None:
            return node(state, config)
        return trace.phase(name, node, state, config)

    phase.__name__ = name
    return phase
