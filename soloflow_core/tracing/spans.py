"""The trace model: one :class:`Span` per thing that ran, for agent runs, flow runs and sequential workflows alike.

A captured agent run is ``invoke_agent`` → its model calls (``chat``) and tool calls
(``execute_tool``); a flow run is ``invoke_flow`` → its steps (``step``) → each call of the
step's tool (``execute_tool``, one per attempt), and ``approval_wait`` while a person decides;
a sequential workflow is ``invoke_workflow`` → its phases (``phase``) → their model calls (``chat``).
Attributes use the OpenTelemetry GenAI names (``gen_ai.*``) plus ``soloflow.*``, so a span
goes to any OpenTelemetry backend as it is (see docs/observability.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

__all__ = ["Span", "SpanKind", "SpanStatus", "trace_id_for"]

SpanKind = Literal[
    "invoke_agent",
    "chat",
    "execute_tool",
    "invoke_flow",
    "step",
    "approval_wait",
    "invoke_workflow",
    "phase",
]
SpanStatus = Literal["ok", "error", "unset"]


@dataclass(slots=True)
class Span:
    """One timed piece of a run, in a tree by ``parent``."""

    trace_id: str
    """32 hex digits, the same for every span of one trace (the OpenTelemetry trace id)."""
    id: str
    """16 hex digits, unique in the trace (the OpenTelemetry span id)."""
    parent: str | None
    """The parent span's ``id``; None for a root."""
    name: str
    """What a person reads: ``chat gpt-4o``, ``execute_tool search``, ``step fetch``."""
    kind: SpanKind
    start: datetime
    """Wall-clock start, timezone-aware UTC."""
    duration_ms: float | None = None
    """Measured on the monotonic clock; None while the span is open."""
    status: SpanStatus = "unset"
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    """``gen_ai.*`` and ``soloflow.*`` attributes: strings, numbers, booleans."""

    @property
    def end(self) -> datetime | None:
        """Wall-clock end: ``start`` plus the measured duration."""
        return (
            None
            if self.duration_ms is None
            else self.start + timedelta(milliseconds=self.duration_ms)
        )


def trace_id_for(run_id: str) -> str:
    """The trace id of a run: its id when it is a UUID's 32 hex digits, else a digest of it
    (a flow run keeps one trace id across its invocations: resume, approval)."""
    plain = run_id.replace("-", "").lower()
    if len(plain) == 32 and all(c in "0123456789abcdef" for c in plain):
        return plain
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]
