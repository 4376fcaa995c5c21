"""Opening and closing the spans of one trace, and telling whoever listens."""

from __future__ import annotations

import logging
import random
import time
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from soloflow_core.tracing.spans import Span, SpanKind

if TYPE_CHECKING:
    import pluggy

__all__ = ["SpanListener", "SpanRecorder", "current_span", "new_span_id"]

_WALL_AT_ZERO = datetime.now(UTC)
_MONO_AT_ZERO = time.perf_counter_ns()
"""One anchor of the wall clock on the monotonic one for the whole process: a span's start
is the anchor plus the monotonic time since, and its end that start plus its monotonic
duration, so spans of different recorders (an agent's tool call, the flow run it started)
nest in time as they nest in the run — reading the wall clock at each start could put a
child's end a fraction of a millisecond after its parent's."""

log = logging.getLogger(__name__)

current_span: ContextVar[Span | None] = ContextVar("soloflow_current_span", default=None)
"""The tool call running in this context, while it runs: a flow run started inside it (a flow
called as a tool) puts its spans under it, in its trace."""


class SpanListener(Protocol):
    """Told of every span as it starts and ends (the OpenTelemetry bridge is one). Both
    methods must be fast and must not raise (an error is logged and the run goes on)."""

    def span_started(self, span: Span) -> None: ...

    def span_ended(self, span: Span) -> None: ...


def new_span_id() -> str:
    """16 random hex digits, never all zero (OpenTelemetry's rule)."""
    return f"{random.getrandbits(64) or 1:016x}"


class SpanRecorder:
    """The spans of one trace, in the order they started.

    Thread-safe as far as its callers need: each span is opened and closed by one thread;
    the list and the open-span table are only appended to and popped from (atomic in CPython).

    Args:
        trace_id: the trace's 32 hex digits (``trace_id_for(run_id)``).
        plugin_manager: where ``soloflow_span_finished`` is called, when it has implementations.
        listener: told of every start and end (``soloflow_core.tracing.otel.active_listener()``).
    """

    __slots__ = ("_hook", "_open", "listener", "spans", "trace_id")

    def __init__(
        self,
        trace_id: str,
        *,
        plugin_manager: pluggy.PluginManager | None = None,
        listener: SpanListener | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.spans: list[Span] = []
        self.listener = listener
        self._open: dict[str, int] = {}
        hook = plugin_manager.hook.soloflow_span_finished if plugin_manager is not None else None
        self._hook = hook if hook is not None and hook.get_hookimpls() else None

    def start(
        self,
        name: str,
        kind: SpanKind,
        parent: Span | str | None,
        attributes: dict[str, Any] | None = None,
        *,
        span_id: str | None = None,
        ago_ms: float = 0.0,
    ) -> Span:
        """Open a span under ``parent`` (a span, its id, or None for a root); ``ago_ms``
        backdates its start (a call whose report comes when it has ended)."""
        mono = time.perf_counter_ns()
        wall = _WALL_AT_ZERO + timedelta(microseconds=(mono - _MONO_AT_ZERO) / 1000)
        if ago_ms:
            wall -= timedelta(milliseconds=ago_ms)
            mono -= int(ago_ms * 1_000_000)
        span = Span(
            trace_id=self.trace_id,
            id=span_id or new_span_id(),
            parent=parent.id if isinstance(parent, Span) else parent,
            name=name,
            kind=kind,
            start=wall,
            attributes=attributes if attributes is not None else {},
        )
        self._open[span.id] = mono
        self.spans.append(span)
        if self.listener is not None:
            try:
                self.listener.span_started(span)
            except Exception:
                log.exception("a span listener failed; the run goes on")
        return span

    def end(
        self,
        span: Span,
        *,
        error: str | None = None,
        attributes: dict[str, Any] | None = None,
        status: str | None = None,
        ended_ns: int | None = None,
    ) -> None:
        """Close ``span``: its duration from the monotonic clock (``time.perf_counter_ns()`` now,
        or ``ended_ns``), ``error`` (status ``error``) or else ``status`` (``ok`` by default),
        ``attributes`` added."""
        started = self._open.pop(span.id, None)
        if started is None:
            return  # already closed
        span.duration_ms = ((ended_ns or time.perf_counter_ns()) - started) / 1_000_000
        if attributes:
            span.attributes.update(attributes)
        span.error = error
        span.status = "error" if error is not None else ("ok" if status is None else status)  # type: ignore[assignment]
        if self.listener is not None:
            try:
                self.listener.span_ended(span)
            except Exception:
                log.exception("a span listener failed; the run goes on")
        if self._hook is not None:
            try:
                self._hook(span=span)
            except Exception:
                log.exception("a soloflow_span_finished plugin failed")

    def close_open(self, *, error: str | None = None) -> None:
        """End every span still open (the run ended under them), innermost first."""
        by_id = {s.id: s for s in self.spans}
        for span_id in reversed(list(self._open)):
            span = by_id.get(span_id)
            if span is not None:
                self.end(span, error=error)
