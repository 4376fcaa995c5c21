"""What a flow run returns: :class:`FlowRunResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from soloflow_core.models import ToolCall

__all__ = ["FlowRunResult", "RunOutcome", "RunStatus"]

RunStatus = Literal["completed", "failed", "fallback", "cancelled", "waiting"]
"""How a run ended, or that it waits: what a caller branches on."""

RunOutcome = Literal[
    "completed", "failed", "fallback", "compensated", "compensation_failed", "cancelled", "rejected"
]
"""Why it ended so, as the store records it (``flows status`` shows it)."""


@dataclass(slots=True, kw_only=True)
class FlowRunResult:
    """How a flow run ended (or paused). Built with keywords only.

    ``status`` is what to branch on: ``completed``; ``failed``; ``fallback`` (the flow hands
    the task back to the agent: read ``handoff``); ``cancelled`` (cancelled, or its approval
    rejected); ``waiting`` (paused for approval: ``interrupt`` holds the question).
    ``outcome`` says why, as recorded in the store: ``completed``; ``failed``,
    ``compensated`` or ``compensation_failed`` (status ``failed``); ``fallback``;
    ``cancelled`` or ``rejected`` (status ``cancelled``); None while the run waits.
    See docs/flows.md.
    """

    run_id: str | None
    flow: str
    status: RunStatus
    outcome: RunOutcome | None
    output: Any = None
    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    steps: list[ToolCall] = field(default_factory=list)
    duration_ms: float = 0.0
    handoff: str | None = None
    interrupt: Any = None
    skipped: dict[str, str] = field(default_factory=dict)
    failed_step: str | None = None
    error: str | None = None
