"""The trace of one captured agent run: ``invoke_agent`` → ``chat`` (each model call, with
its tokens and cost) and ``execute_tool`` (each tool call), built from LangChain's callback
events by :class:`~soloflow_langgraph.callbacks.SoloFlowCallbackHandler`."""

from __future__ import annotations

import logging
import time
from contextvars import Token
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from soloflow_core.store.packed_spans import PackedSpans
from soloflow_core.tracing import (
    PriceTable,
    Span,
    SpanListener,
    SpanRecorder,
    active_listener,
    current_span,
)
from soloflow_core.tracing.tree import COST, INPUT_TOKENS, OUTPUT_TOKENS, UNPRICED

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pluggy

    from soloflow_core.tracing.otel import OpenTelemetryBridge

log = logging.getLogger(__name__)

__all__ = ["AgentTrace", "DeferredAgentTrace", "chat_attributes", "start_agent_trace"]

_LOW64 = (1 << 64) - 1


def span_id_of(run_id: UUID) -> str:
    """A LangChain run's span id: the low 64 bits of its UUID (the random ones of a UUIDv7)."""
    return (run_id.int & _LOW64 or 1).to_bytes(8).hex()


def chat_attributes(
    prices: PriceTable, span: Span, *, usage: dict[str, Any] | None, response_model: str | None
) -> dict[str, Any]:
    """The attributes a ``chat`` span gets when its call ends: the model that answered, the
    tokens of its ``usage_metadata`` and their cost (``soloflow.unpriced`` when no price is
    known for the model: the one that answered, else the one asked)."""
    attrs: dict[str, Any] = {}
    _add_answer(
        attrs,
        prices,
        span.attributes.get("gen_ai.request.model"),
        usage=usage,
        response_model=response_model,
    )
    return attrs


def _add_answer(
    attrs: dict[str, Any],
    prices: PriceTable,
    asked: str | None,
    *,
    usage: dict[str, Any] | None,
    response_model: str | None,
) -> None:
    """:func:`chat_attributes` added to ``attrs`` (of a call to the model ``asked``)."""
    if response_model:
        attrs["gen_ai.response.model"] = response_model
    if usage:
        inp, out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        attrs[INPUT_TOKENS], attrs[OUTPUT_TOKENS] = inp, out
        cost = prices.cost(response_model or asked, input_tokens=inp, output_tokens=out)
        if cost is None:
            attrs[UNPRICED] = True
        else:
            attrs[COST] = cost


def start_agent_trace(
    root_id: UUID,
    name: str | None,
    *,
    prices: PriceTable,
    plugin_manager: pluggy.PluginManager | None,
) -> AgentTrace | DeferredAgentTrace:
    """The trace of a root run starting now: spans made as the run goes when a
    ``soloflow_span_finished`` hook or a live OpenTelemetry export (``configure_tracing(...,
    live=True)``) is told of them one by one, else made when the run ends (the same spans,
    for less work on the agent's path) and handed to the OpenTelemetry export, if any, then."""
    listener = active_listener()
    hook = plugin_manager.hook.soloflow_span_finished if plugin_manager is not None else None
    if (listener is None or not listener.live) and (hook is None or not hook.get_hookimpls()):
        return DeferredAgentTrace(root_id, name, prices=prices, listener=listener)
    return AgentTrace(
        root_id, name, prices=prices, plugin_manager=plugin_manager, listener=listener
    )


def _agent_attributes(name: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
    if name:
        attrs["gen_ai.agent.name"] = name
    return attrs


class AgentTrace:
    """The spans of one root run, keyed by LangChain run id, made as the run goes (each told
    to the listener and the hook as it starts and ends). Called under the handler's lock or
    from the thread that owns the run being ended."""

    __slots__ = ("cost", "open", "prices", "recorder", "root", "tokens", "unpriced")

    def __init__(
        self,
        root_id: UUID,
        name: str | None,
        *,
        prices: PriceTable,
        plugin_manager: pluggy.PluginManager | None,
        listener: SpanListener | None = None,
    ) -> None:
        self.recorder = SpanRecorder(root_id.hex, plugin_manager=plugin_manager, listener=listener)
        self.prices = prices
        self.open: dict[int, Span] = {}
        self.tokens: dict[int, Token[Span | None]] = {}
        """Tool calls that are ``current_span`` in the context they run in."""
        self.cost = 0.0
        self.unpriced = 0
        self.root = self.recorder.start(
            f"invoke_agent {name}" if name else "invoke_agent",
            "invoke_agent",
            None,
            _agent_attributes(name),
            span_id=span_id_of(root_id),
        )

    def _parent(self, parent_run_id: UUID | None) -> Span:
        # A model or tool run's parent is a graph node chain (not a span): the agent's span.
        if parent_run_id is not None:
            found = self.open.get(parent_run_id.int)
            if found is not None:
                return found
        return self.root

    def model_started(self, run_id: UUID, parent_run_id: UUID | None, model: str | None) -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model:
            attrs["gen_ai.request.model"] = model
        self.open[run_id.int] = self.recorder.start(
            f"chat {model}" if model else "chat",
            "chat",
            self._parent(parent_run_id),
            attrs,
            span_id=span_id_of(run_id),
        )

    def model_ended(
        self,
        run_id: UUID,
        usage: dict[str, Any] | None,
        response_model: str | None,
        error: str | None = None,
    ) -> None:
        span = self.open.pop(run_id.int, None)
        if span is None:
            return
        attrs = chat_attributes(self.prices, span, usage=usage, response_model=response_model)
        if attrs.get(UNPRICED):
            self.unpriced += 1
        elif COST in attrs:
            self.cost += attrs[COST]
        self.recorder.end(span, error=error, attributes=attrs)

    def tool_started(
        self, run_id: UUID, parent_run_id: UUID | None, name: str, call_id: str | None
    ) -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        if span_id_of(run_id) == self.root.id:  # a tool called on its own: it is the run
            self.root.name, self.root.kind = f"execute_tool {name}", "execute_tool"
            self.root.attributes.clear()
            self.root.attributes.update(attrs)
            return
        span = self.recorder.start(
            f"execute_tool {name}",
            "execute_tool",
            self._parent(parent_run_id),
            attrs,
            span_id=span_id_of(run_id),
        )
        self.open[run_id.int] = span
        # The handler is called in the context the tool then runs in (a copy of it).
        self.tokens[run_id.int] = current_span.set(span)

    def tool_ended(self, run_id: UUID, error: str | None) -> None:
        token = self.tokens.pop(run_id.int, None)
        if token is not None:
            try:
                current_span.reset(token)
            except ValueError:  # ended in another context than it started in: nothing to undo here
                pass
        span = self.open.pop(run_id.int, None)
        if span is not None:
            self.recorder.end(span, error=error)

    def finish(self, error: str | None) -> list[Span]:
        """End the run's span (and any left open under it); its spans, in start order."""
        self.recorder.close_open(error=error)
        return self.recorder.spans

    @property
    def run_cost(self) -> float | None:
        """The run's cost in USD; None when a model call is unpriced (unknown, not 0)."""
        return None if self.unpriced else self.cost


# The fields of a call noted by DeferredAgentTrace (a list: the cheapest record to make).
_KEY, _PARENT, _NAME, _STARTED, _ENDED, _USAGE, _ANSWERED_BY, _ERROR, _SPAN = range(9)


def _low_hex(key: int) -> str:
    return (key & _LOW64 or 1).to_bytes(8).hex()


class DeferredAgentTrace:
    """The same spans as :class:`AgentTrace`, made when the run ends: each callback notes a
    clock reading and what it was told; :meth:`finish` makes the spans (their wall-clock
    starts: the run's own plus the monotonic time since) and prices the model calls. For a
    run no listener and no hook watch live. A tool call's span object exists from its start
    (it is ``current_span`` while the tool runs); the spans :meth:`finish` returns are made
    from what was noted, in the packed form the store writes (:class:`PackedSpans`)."""

    __slots__ = (
        "base_ns",
        "calls",
        "cost",
        "listener",
        "open",
        "prices",
        "root",
        "tokens",
        "unpriced",
    )

    def __init__(
        self,
        root_id: UUID,
        name: str | None,
        *,
        prices: PriceTable,
        listener: OpenTelemetryBridge | None = None,
    ) -> None:
        self.root = Span(
            trace_id=root_id.int.to_bytes(16).hex(),  # root_id.hex, without its slow format
            id=span_id_of(root_id),
            parent=None,
            name=f"invoke_agent {name}" if name else "invoke_agent",
            kind="invoke_agent",
            start=datetime.now(UTC),
            attributes=_agent_attributes(name),
        )
        self.base_ns = time.perf_counter_ns()
        self.prices = prices
        self.calls: list[list[Any]] = []
        """Model calls (no ``_SPAN``) and tool calls, in the order they started."""
        self.open: dict[int, list[Any]] = {}
        self.tokens: dict[int, Token[Span | None]] = {}
        self.cost = 0.0
        self.unpriced = 0
        self.listener = listener
        if listener is not None:
            listener.span_pending(self.root)

    def _parent(self, parent_run_id: UUID | None) -> int | None:
        if parent_run_id is not None and parent_run_id.int in self.open:
            return parent_run_id.int
        return None  # a graph node chain, not a span: the agent's span

    def model_started(self, run_id: UUID, parent_run_id: UUID | None, model: str | None) -> None:
        key = run_id.int
        call = [key, self._parent(parent_run_id), model, time.perf_counter_ns(), 0, None, None]
        call += (None, None)
        self.open[key] = call
        self.calls.append(call)

    def model_ended(
        self,
        run_id: UUID,
        usage: dict[str, Any] | None,
        response_model: str | None,
        error: str | None = None,
    ) -> None:
        call = self.open.pop(run_id.int, None)
        if call is not None:
            call[_ENDED] = time.perf_counter_ns()
            call[_USAGE], call[_ANSWERED_BY], call[_ERROR] = usage, response_model, error

    def tool_started(
        self, run_id: UUID, parent_run_id: UUID | None, name: str, call_id: str | None
    ) -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        key = run_id.int
        span_id = _low_hex(key)
        root = self.root
        if span_id == root.id:  # a tool called on its own: it is the run
            root.name, root.kind = f"execute_tool {name}", "execute_tool"
            root.attributes.clear()
            root.attributes.update(attrs)
            return
        parent = self._parent(parent_run_id)
        span = Span(
            trace_id=root.trace_id,
            id=span_id,
            parent=root.id if parent is None else _low_hex(parent),
            name=f"execute_tool {name}",
            kind="execute_tool",
            start=root.start,
            attributes=attrs,
        )
        started = time.perf_counter_ns()
        call = [key, parent, name, started, 0, None, None, None, span]
        self.open[key] = call
        if self.listener is not None:  # a flow called as this tool may start under it
            span.start = root.start + timedelta(microseconds=(started - self.base_ns) / 1000)
            self.listener.span_pending(span)
        self.calls.append(call)
        # The handler is called in the context the tool then runs in (a copy of it).
        self.tokens[key] = current_span.set(span)

    def tool_ended(self, run_id: UUID, error: str | None) -> None:
        key = run_id.int
        token = self.tokens.pop(key, None)
        if token is not None:
            try:
                current_span.reset(token)
            except ValueError:  # ended in another context than it started in: nothing to undo here
                pass
        call = self.open.pop(key, None)
        if call is not None:
            call[_ENDED], call[_ERROR] = time.perf_counter_ns(), error

    def finish(self, error: str | None) -> Sequence[Span]:
        """End the run's span (and any call left open under it, with ``error``); its spans,
        in start order, in the packed form the store writes as is (a listener is handed them
        as span objects, made from it)."""
        now = time.perf_counter_ns()
        root = self.root
        root.duration_ms = (now - self.base_ns) / 1_000_000
        root.error = error
        root.status = "ok" if error is None else "error"
        packed = self._packed(now, error)
        if self.listener is not None:
            try:
                self.listener.spans_finished(list(packed))
            except Exception:
                log.exception("a span listener failed; the run goes on")
        return packed

    def _packed(self, now: int, error: str | None) -> PackedSpans:
        """The run's spans packed as the store keeps them, made directly from the calls (no
        span object, no datetime per call): a call's start is the run's plus its monotonic
        offset, rounded to the microsecond."""
        root, base_ns = self.root, self.base_ns
        root_id = root.id
        shapes: dict[tuple[str, ...], int] = {}
        records: list[list[Any]] = []
        for call in self.calls:
            span: Span | None = call[_SPAN]
            if span is None:
                model = call[_NAME]
                attrs = self._chat_attributes(call)
                span_id, name, kind = (
                    _low_hex(call[_KEY]),
                    f"chat {model}" if model else "chat",
                    "chat",
                )
                parent = None if call[_PARENT] is None else _low_hex(call[_PARENT])
            else:
                attrs, span_id, name, kind = span.attributes, span.id, span.name, span.kind
                parent = span.parent
            ended, failed = call[_ENDED], call[_ERROR]
            if not ended:  # left open: it ends with the run
                ended, failed = now, error
            started = call[_STARTED]
            records.append(
                [
                    span_id,
                    None if parent == root_id else parent,
                    name,
                    kind,
                    round((started - base_ns) / 1000),  # as timedelta rounds it
                    (ended - started) / 1_000_000,
                    "ok" if failed is None else "error",
                    failed,
                    shapes.setdefault(tuple(attrs), len(shapes)),
                    *attrs.values(),
                ]
            )
        return PackedSpans(root, shapes=list(shapes), records=records)

    def _chat_attributes(self, call: list[Any]) -> dict[str, Any]:
        model = call[_NAME]
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model:
            attrs["gen_ai.request.model"] = model
        if call[_ENDED]:  # its answer came: the model that gave it, tokens, cost
            _add_answer(
                attrs, self.prices, model, usage=call[_USAGE], response_model=call[_ANSWERED_BY]
            )
            if attrs.get(UNPRICED):
                self.unpriced += 1
            elif COST in attrs:
                self.cost += attrs[COST]
        return attrs

    @property
    def run_cost(self) -> float | None:
        """The run's cost in USD (known once :meth:`finish` ran); None when a model call is
        unpriced (unknown, not 0)."""
        return None if self.unpriced else self.cost
