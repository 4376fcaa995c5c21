"""The trace of a flow run: ``invoke_flow`` (one per invocation: the start, each resume or
approval) → ``step`` (one per step) → ``execute_tool`` (each call of the step's tool: one
per attempt, one per item of a map step); ``approval_wait`` between an invocation that
waits for a person and the next one. Stored under the flow run's id."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.tracing import Span, SpanRecorder, active_listener, current_span, trace_id_for

if TYPE_CHECKING:
    from types import TracebackType

    import pluggy

    from soloflow_core.models import FlowDefinition, FlowStep
    from soloflow_core.store import Store
    from soloflow_langgraph.runtime.results import FlowRunResult

__all__ = ["FlowTrace"]

log = logging.getLogger(__name__)
WAITING = "soloflow.flow_run.status"
"""The status an invocation ended with (``waiting``: for a person's approval)."""


class FlowTrace:
    """The spans of one invocation of a flow run."""

    def __init__(
        self,
        flow: FlowDefinition,
        run_id: str,
        *,
        user_id: str,
        agent_id: str,
        store: Store | None,
        plugin_manager: pluggy.PluginManager | None,
        resumed: bool,
    ) -> None:
        self.flow, self.run_id, self.store = flow, run_id, store
        self.user_id, self.agent_id = user_id, agent_id
        self.pm = plugin_manager
        self.listener = active_listener()
        caller = current_span.get()  # the tool call this run is inside (a flow called as a tool)
        trace_id = caller.trace_id if caller is not None else trace_id_for(run_id)
        self.recorder = SpanRecorder(
            trace_id, plugin_manager=plugin_manager, listener=self.listener
        )
        self.steps: dict[str, tuple[Span, int, int]] = {}
        """Step id → (its span, its calls so far, when its last call ended, perf_counter_ns)."""
        self.calls: dict[str, Span] = {}
        """The ``execute_tool`` span of each call in progress, by step key."""
        self._lock = threading.Lock()
        self._waited_since = self._previous_wait() if resumed else None
        attrs = {
            "soloflow.flow.name": flow.name,
            "soloflow.flow.version": flow.version,
            "soloflow.flow_run.id": run_id,
            "soloflow.namespace": f"{user_id}/{agent_id}",
        }
        if self._waited_since is not None:
            ms = (datetime.now(UTC) - self._waited_since).total_seconds() * 1000
            wait = self.recorder.start(
                "approval_wait", "approval_wait", None, dict(attrs), ago_ms=max(ms, 0.0)
            )
            self.recorder.end(wait)
        self.root = self.recorder.start(f"invoke_flow {flow.name}", "invoke_flow", caller, attrs)
        if caller is not None:  # the agent's trace finds this run's spans by it
            caller.attributes["soloflow.flow_run.id"] = run_id
        self._hook("soloflow_flow_run_started", run_id=run_id, flow=flow)

    def _previous_wait(self) -> datetime | None:
        """When the run's last invocation ended waiting for approval, if it did."""
        if self.store is None:
            return None
        try:
            spans = self.store.get_spans(self.run_id, user_id=self.user_id, agent_id=self.agent_id)
        except Exception:
            log.exception("reading the trace of flow run %r failed", self.run_id)
            return None
        roots = [s for s in spans if s.kind == "invoke_flow"]
        if roots and roots[-1].attributes.get(WAITING) == "waiting":
            return roots[-1].end
        return None

    def _hook(self, name: str, **kwargs: Any) -> None:
        hook = getattr(self.pm.hook, name) if self.pm is not None else None
        if hook is None or not hook.get_hookimpls():
            return
        try:
            hook(**kwargs)
        except Exception:
            log.exception("a %s plugin failed", name)

    def current(self) -> AbstractContextManager[Any]:
        """The run's OpenTelemetry span made current around the graph's invocation, so that
        spans of the user's own instrumented tools nest under it; a no-op without export."""
        otel = self.listener.current(self.root) if self.listener is not None else None
        if otel is None:
            return nullcontext()
        from opentelemetry import trace

        return trace.use_span(otel, end_on_exit=False)

    def call(self, step: FlowStep, index: int, key: str) -> AbstractContextManager[Any]:
        """Around one call of ``step``'s tool (``key``: the step, or one item of a map step):
        its ``execute_tool`` span (and the step's span, at its first call) open while it runs,
        and made the current OpenTelemetry span in the calling thread when spans are
        exported, so that spans of the user's own instrumented tool nest under it."""
        return _StepCall(self, step, index=index, key=key)

    def timed_out(self, step: FlowStep, key: str, error: str) -> None:
        """The call of ``key`` that the previous invocation left running past its limit
        failed with ``error`` (its span ends now)."""
        tool = self.calls.pop(key, None)
        if tool is not None:
            self._call_ended(step, key, tool=tool, error=error)

    def _call_started(self, step: FlowStep, index: int, key: str) -> Span:
        with self._lock:
            known = self.steps.get(step.id)
            if known is None:
                span = self.recorder.start(
                    f"step {step.id}",
                    "step",
                    self.root,
                    {"soloflow.step.id": step.id, "soloflow.step.index": index},
                )
                count, ended = 1, 0
            else:
                span, count, ended = known[0], known[1] + 1, known[2]
            self.steps[step.id] = (span, count, ended)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step.skill_key,
            "soloflow.step.id": step.id,
        }
        attrs["soloflow.map_item" if step.map_over else "soloflow.attempt"] = count
        tool = self.calls[key] = self.recorder.start(
            f"execute_tool {step.skill_key}", "execute_tool", span, attrs
        )
        return tool

    def _call_ended(self, step: FlowStep, key: str, *, tool: Span, error: str | None) -> None:
        ended = time.perf_counter_ns()
        if self.calls.get(key) is tool:
            del self.calls[key]
        self.recorder.end(tool, error=error, ended_ns=ended)
        with self._lock:
            span, count, last = self.steps[step.id]
            self.steps[step.id] = (span, count, max(ended, last))
            if error is not None:
                span.error = error  # the step's last failure, unless a later call succeeds
            elif span.error is not None and not step.map_over:
                span.error = None

    def finish(self, result: FlowRunResult | None, error: str | None = None) -> None:
        """End the invocation's spans, store them and call ``soloflow_flow_run_finished``."""
        for tool in list(self.calls.values()):  # a call the run stopped waiting for (an interrupt)
            self.recorder.end(tool, error=error or "the run stopped waiting for this call")
        for span, _count, ended in self.steps.values():
            self.recorder.end(span, error=span.error, ended_ns=ended)
        status = result.status if result is not None else "failed"
        err = (
            error
            if result is None
            else (result.error if status in ("failed", "fallback") else None)
        )
        self.recorder.end(
            self.root,
            error=err,
            attributes={WAITING: status},
            status="unset" if status == "waiting" else None,
        )
        spans = self.recorder.spans
        if self.store is not None:
            try:
                self.store.add_spans(
                    self.run_id, spans, user_id=self.user_id, agent_id=self.agent_id
                )
            except Exception:
                log.exception("storing the trace of flow run %r failed", self.run_id)
        self._hook(
            "soloflow_flow_run_finished",
            run_id=self.run_id,
            flow=self.flow,
            status=status,
            spans=spans,
        )


class _StepCall:
    """The context manager of :meth:`FlowTrace.call`."""

    __slots__ = ("index", "key", "span", "step", "token", "trace")

    def __init__(self, trace: FlowTrace, step: FlowStep, *, index: int, key: str) -> None:
        self.trace, self.step, self.index, self.key = trace, step, index, key
        self.token: Any = None

    def __enter__(self) -> Span:
        self.span = self.trace._call_started(self.step, self.index, self.key)
        listener = self.trace.listener
        otel = listener.current(self.span) if listener is not None else None
        if otel is not None:
            from opentelemetry import context, trace

            self.token = context.attach(trace.set_span_in_context(otel))
        return self.span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.token is not None:
            from opentelemetry import context

            context.detach(self.token)
        if exc is not None and not isinstance(exc, Exception):
            return  # abandoned or interrupted: ended by the next invocation's node, or by finish
        self.trace._call_ended(
            self.step,
            self.key,
            tool=self.span,
            error=None if exc is None else f"{type(exc).__name__}: {exc}",
        )
