"""Live export to OpenTelemetry (the ``otel`` extra: ``pip install 'soloflow-engine[otel]'``).

``configure_tracing(tracer_provider)`` in code, or the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``
(or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) in the environment: every span SoloFlow records is
started and ended as an OpenTelemetry span as it happens, with the GenAI semantic-convention
attributes it already carries. Export runs on the SDK's batch processor thread, so it never
blocks the agent or the flow; a collector that cannot be reached is logged once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from soloflow_core.tracing.spans import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanContext, TracerProvider

__all__ = [
    "OpenTelemetryBridge",
    "active_listener",
    "configure_tracing",
    "configure_tracing_from_env",
]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_bridge: OpenTelemetryBridge | None = None
_from_env_done = False
_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def configure_tracing(
    tracer_provider: TracerProvider | None,
    *,
    live: bool = False,
    span_processor: SpanProcessor | None = None,
) -> None:
    """Export every span from now on through ``tracer_provider`` (None: stop exporting).

    A flow run's and a sequential workflow's spans are exported as each ends. A captured agent
    run's spans are handed over together when the run ends (less work on the agent's path);
    ``live=True`` exports them one by one as each ends instead (``SOLOFLOW_OTEL_LIVE=1`` when
    configured from the environment).

    ``span_processor``: a processor added to ``tracer_provider`` (say its
    ``BatchSpanProcessor``): an agent run's ended spans are then handed straight to it as
    finished spans, with the provider's resource, id generator and sampler, instead of being
    started and ended one by one through the tracer — the same spans, about a sixth of the
    SDK's work per span. Its other processors do not see those spans. Configured from the
    environment, SoloFlow owns the pipeline and does this by itself.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
        >>> configure_tracing(TracerProvider())  # doctest: +SKIP
    """
    global _bridge, _from_env_done
    with _lock:
        _from_env_done = True  # code decides: the environment is not read any more
        _bridge = (
            None
            if tracer_provider is None
            else OpenTelemetryBridge(tracer_provider, live=live, span_processor=span_processor)
        )


def configure_tracing_from_env() -> OpenTelemetryBridge | None:
    """Export through an OTLP/HTTP exporter configured by the ``OTEL_EXPORTER_OTLP_*`` (and
    ``OTEL_SERVICE_NAME``) variables as they are now; None when no endpoint is set. This is
    what the first span does by itself; call it to read the environment again."""
    global _bridge, _from_env_done
    with _lock:
        _from_env_done = True
        _bridge = _bridge_from_env() if any(os.environ.get(name) for name in _ENV) else None
        return _bridge


def active_listener() -> OpenTelemetryBridge | None:
    """The bridge spans go to: the configured one, else one built once from the standard
    ``OTEL_EXPORTER_OTLP_*`` variables (when set and the ``otel`` extra is installed)."""
    global _bridge, _from_env_done
    if _from_env_done:
        return _bridge
    with _lock:
        if not _from_env_done:
            _from_env_done = True
            if any(os.environ.get(name) for name in _ENV):
                _bridge = _bridge_from_env()
    return _bridge


def _bridge_from_env() -> OpenTelemetryBridge | None:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the otel extra is not installed "
            "(pip install 'soloflow-engine[otel]'): spans are not exported"
        )
        return None
    service = os.environ.get("OTEL_SERVICE_NAME") or "soloflow"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = cast(
        "SpanExporter", LoggedOnceExporter(OTLPSpanExporter())
    )  # a SpanExporter in all but name
    processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return OpenTelemetryBridge(provider, live=_live_from_env(), span_processor=processor)


def _live_from_env() -> bool:
    value = os.environ.get("SOLOFLOW_OTEL_LIVE", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value not in ("", "0", "false", "no", "off"):
        log.warning(
            "SOLOFLOW_OTEL_LIVE=%r is not a yes or a no (1/true/yes/on, 0/false/no/off): "
            "an agent run's spans are exported when it ends",
            os.environ["SOLOFLOW_OTEL_LIVE"],
        )
    return False


class LoggedOnceExporter:
    """Wraps a span exporter: a failed export is logged once (not on every batch) and the
    spans are dropped; the wrapped exporter's own log is quietened after that."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self._failed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.exporter.export(spans)
        except Exception as exc:
            result = SpanExportResult.FAILURE
            reason: str = f"{type(exc).__name__}: {exc}"
        else:
            reason = "the exporter reported a failure"
        if result is not SpanExportResult.SUCCESS and not self._failed:
            self._failed = True
            log.warning(
                "OpenTelemetry export failed (%s); spans are dropped until the collector "
                "answers, and this is not logged again",
                reason,
            )
            logging.getLogger(type(self.exporter).__module__).setLevel(logging.CRITICAL)
        return cast("SpanExportResult", result)

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.exporter.force_flush(timeout_millis))


def _ns(span: Span) -> int:
    return int(span.start.timestamp() * 1_000_000) * 1000


class OpenTelemetryBridge:
    """Starts an OpenTelemetry span when a SoloFlow span starts and ends it when it ends, under
    the OpenTelemetry span of its parent (a :class:`~soloflow_core.tracing.recorder.SpanListener`);
    takes the spans of a run whose spans are made when it ends all at once (:meth:`spans_finished`).

    Args:
        tracer_provider: where the spans go.
        live: a captured agent run's spans too are exported one by one as each ends (else
            together when the run ends).
        span_processor: one of the provider's processors, that the spans handed over
            together go to directly, as finished spans (see :func:`configure_tracing`).
    """

    def __init__(
        self,
        tracer_provider: TracerProvider,
        *,
        live: bool = False,
        span_processor: SpanProcessor | None = None,
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.live = live
        self.provider = tracer_provider
        self.processor = span_processor
        self._finished = None if span_processor is None else _Finisher(tracer_provider)
        self.tracer = tracer_provider.get_tracer("soloflow")
        self._open: dict[str, Any] = {}
        self._sent: dict[str, dict[str, Any]] = {}
        """Each open span's attributes as given to its OpenTelemetry span at the start."""
        self._pending: dict[str, Span] = {}
        """Spans of runs whose spans are handed over when they end (:meth:`spans_finished`),
        that a live span may still need as its parent (a flow called as a tool)."""
        self._pending_lock = threading.Lock()
        self._ok = trace.Status(trace.StatusCode.OK)

    @property
    def pending(self) -> int:
        """How many spans of runs still going wait to be handed over (0 between runs)."""
        return len(self._pending)

    def span_pending(self, span: Span) -> None:
        """``span`` has started (its ``start`` is right) and will be handed over, ended, by
        :meth:`spans_finished`; started in OpenTelemetry before that only when a live span
        starts under it."""
        self._pending[span.id] = span

    def spans_finished(self, spans: Sequence[Span]) -> None:
        """Hand over the ended spans of one run at once, parents before children (an agent
        run's, as it ends): each started and ended in OpenTelemetry with its own start and
        end times, in one pass (the spans need no bookkeeping while they are open)."""
        if self._finished is not None and self.processor is not None:
            self._finished.hand_over(self, spans)
            return
        trace, tracer, live = self._trace, self.tracer, self._open
        made: dict[str, Any] = {}
        contexts: dict[str, Any] = {}
        for span in spans:
            self._pending.pop(span.id, None)
            if span.id in live:  # started early: a live span started under it
                made[span.id] = live[span.id]
                self.span_ended(span)
                continue
            context = None
            if span.parent:
                context = contexts.get(span.parent)
                if context is None:
                    parent = made.get(span.parent) or live.get(span.parent)
                    if parent is not None:
                        context = contexts[span.parent] = trace.set_span_in_context(parent)
            attributes = span.attributes
            if span.error is not None:
                attributes = {**attributes, "error.type": span.error.split(":", 1)[0]}
            start = _ns(span)
            otel = tracer.start_span(
                span.name,
                context=context,
                kind=trace.SpanKind.CLIENT if span.kind == "chat" else trace.SpanKind.INTERNAL,
                attributes=attributes,
                start_time=start,
            )
            if span.error is not None:
                otel.set_status(trace.Status(trace.StatusCode.ERROR, span.error))
            elif span.status == "ok":
                otel.set_status(self._ok)
            otel.end(end_time=start + int((span.duration_ms or 0.0) * 1_000_000))
            made[span.id] = otel

    def _parent_of(self, parent_id: str) -> Any:
        parent = self._open.get(parent_id)
        if parent is not None or parent_id not in self._pending:
            return parent
        with self._pending_lock:  # a live span under a pending one: start the pending chain
            chain: list[Span] = []
            span = self._pending.get(parent_id)
            while span is not None and span.id not in self._open:
                chain.append(span)
                span = self._pending.get(span.parent) if span.parent else None
            for pending in reversed(chain):
                self.span_started(pending)
                self._pending.pop(pending.id, None)
        return self._open.get(parent_id)

    def span_started(self, span: Span) -> None:
        trace = self._trace
        parent = self._parent_of(span.parent) if span.parent else None
        context = trace.set_span_in_context(parent) if parent is not None else None
        kind = trace.SpanKind.CLIENT if span.kind == "chat" else trace.SpanKind.INTERNAL
        self._open[span.id] = self.tracer.start_span(
            span.name, context=context, kind=kind, attributes=span.attributes, start_time=_ns(span)
        )
        self._sent[span.id] = dict(span.attributes)

    def span_ended(self, span: Span) -> None:
        otel = self._open.pop(span.id, None)
        sent = self._sent.pop(span.id, None) or {}
        if otel is None:
            return
        missing = object()
        changed = {k: v for k, v in span.attributes.items() if sent.get(k, missing) != v}
        if changed:  # the SDK checks every attribute it is given again: only what is new
            otel.set_attributes(changed)
        if span.error is not None:
            otel.set_status(self._trace.Status(self._trace.StatusCode.ERROR, span.error))
            otel.set_attribute("error.type", span.error.split(":", 1)[0])
        elif span.status == "ok":
            otel.set_status(self._trace.Status(self._trace.StatusCode.OK))
        otel.end(end_time=_ns(span) + int((span.duration_ms or 0.0) * 1_000_000))

    def current(self, span: Span) -> Any:
        """The OpenTelemetry span of an open SoloFlow span (to make it current around a
        step's call, so the user's own instrumented calls nest under it), or None."""
        return self._open.get(span.id)


_PLAIN = (str, int, float, bool)


class _Finisher:
    """Makes a run's ended spans finished OpenTelemetry spans directly (``ReadableSpan``),
    with the provider's resource, id generator and sampler, and hands them to the bridge's
    span processor: what ``start_span`` and ``end`` do for an ended span, without the
    bookkeeping a span still open needs."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.attributes import BoundedAttributes
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self._trace, self._readable, self._bounded = trace, ReadableSpan, BoundedAttributes
        self.resource = getattr(provider, "resource", None) or Resource.create({})
        self.ids = getattr(provider, "id_generator", None) or RandomIdGenerator()
        self.sampler = getattr(provider, "sampler", None)
        self.scope = InstrumentationScope("soloflow")
        self.sampled = trace.TraceFlags(trace.TraceFlags.SAMPLED)
        self.unsampled = trace.TraceFlags(trace.TraceFlags.DEFAULT)
        self.ok = trace.Status(trace.StatusCode.OK)

    def _clean(self, attributes: dict[str, Any]) -> Any:
        """``attributes`` as the SDK would keep them: a copy when every value is a plain
        string, number or bool (what SoloFlow's spans carry), else cleaned by the SDK's own
        ``BoundedAttributes`` (a list made a tuple, a value it cannot export dropped)."""
        if all(type(v) in _PLAIN for v in attributes.values()):
            return dict(attributes)
        return self._bounded(attributes=attributes, immutable=True)

    def _root_flags(self, span: Span, trace_id: int, kind: Any) -> Any:
        if self.sampler is None:
            return self.sampled
        decision = self.sampler.should_sample(
            None, trace_id, span.name, kind=kind, attributes=span.attributes
        ).decision
        return self.sampled if decision.is_sampled() else self.unsampled

    def hand_over(self, bridge: OpenTelemetryBridge, spans: Sequence[Span]) -> None:
        trace, live, processor = self._trace, bridge._open, bridge.processor
        assert processor is not None
        made: dict[str, SpanContext] = {}
        for span in spans:
            bridge._pending.pop(span.id, None)
            if span.id in live:  # started early: a live span started under it
                made[span.id] = live[span.id].get_span_context()
                bridge.span_ended(span)
                continue
            kind = trace.SpanKind.CLIENT if span.kind == "chat" else trace.SpanKind.INTERNAL
            parent = made.get(span.parent) if span.parent else None
            if parent is None and span.parent in live:
                parent = live[span.parent].get_span_context()
            if parent is None:  # a root: under the caller's current span, as start_span does
                current = trace.get_current_span().get_span_context()
                parent = current if current.is_valid else None
            if parent is None:
                trace_id = self.ids.generate_trace_id()
                flags = self._root_flags(span, trace_id, kind)
            else:
                trace_id, flags = parent.trace_id, parent.trace_flags
            context = trace.SpanContext(
                trace_id, self.ids.generate_span_id(), is_remote=False, trace_flags=flags
            )
            made[span.id] = context
            if not flags.sampled:
                continue
            attributes = span.attributes
            status = self.ok if span.status == "ok" else trace.Status(trace.StatusCode.UNSET)
            if span.error is not None:
                attributes = {**attributes, "error.type": span.error.split(":", 1)[0]}
                status = trace.Status(trace.StatusCode.ERROR, span.error)
            start = _ns(span)
            processor.on_end(
                self._readable(
                    span.name,
                    context=context,
                    parent=parent,
                    resource=self.resource,
                    attributes=self._clean(attributes),
                    kind=kind,
                    status=status,
                    start_time=start,
                    end_time=start + int((span.duration_ms or 0.0) * 1_000_000),
                    instrumentation_scope=self.scope,
                )
            )
