"""Traces: spans for agent runs and flow runs, their cost, the tree, and export.

See docs/observability.md. OpenTelemetry export (``configure_tracing``) needs the ``otel`` extra.
"""

from soloflow_core.tracing.otel import (
    active_listener,
    configure_tracing,
    configure_tracing_from_env,
)
from soloflow_core.tracing.otlp_json import otlp_json
from soloflow_core.tracing.pricing import PriceTable
from soloflow_core.tracing.recorder import SpanListener, SpanRecorder, current_span, new_span_id
from soloflow_core.tracing.spans import Span, SpanKind, SpanStatus, trace_id_for
from soloflow_core.tracing.tree import TraceNode, build_tree, tree_json

__all__ = [
    "PriceTable",
    "Span",
    "SpanKind",
    "SpanListener",
    "SpanRecorder",
    "SpanStatus",
    "TraceNode",
    "active_listener",
    "build_tree",
    "configure_tracing",
    "configure_tracing_from_env",
    "current_span",
    "new_span_id",
    "otlp_json",
    "trace_id_for",
    "tree_json",
]
