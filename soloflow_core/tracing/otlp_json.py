"""The OTLP JSON form of a trace (``soloflow runs trace --otlp-json``): what an OpenTelemetry
collector's file receiver, Jaeger and Phoenix import.

Ids are hex strings and 64-bit integers decimal strings, as the OTLP/JSON encoding says.
"""

from __future__ import annotations

from typing import Any

from soloflow_core.tracing.spans import Span

__all__ = ["otlp_json"]

_KIND_INTERNAL, _KIND_CLIENT = 1, 3
_STATUS = {"unset": 0, "ok": 1, "error": 2}


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attrs.items() if v is not None]


def _span(span: Span) -> dict[str, Any]:
    start = int(span.start.timestamp() * 1_000_000) * 1000
    end = start + int((span.duration_ms or 0.0) * 1_000_000)
    status: dict[str, Any] = {"code": _STATUS.get(span.status, 0)}
    if span.error:
        status["message"] = span.error
    return {
        "traceId": span.trace_id,
        "spanId": span.id,
        "parentSpanId": span.parent or "",
        "name": span.name,
        "kind": _KIND_CLIENT if span.kind == "chat" else _KIND_INTERNAL,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": _attributes(span.attributes),
        "status": status,
    }


def otlp_json(spans: list[Span], *, service_name: str = "soloflow") -> dict[str, Any]:
    """``spans`` as one OTLP ``ExportTraceServiceRequest`` in its JSON form."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service_name})},
                "scopeSpans": [{"scope": {"name": "soloflow"}, "spans": [_span(s) for s in spans]}],
            }
        ]
    }
