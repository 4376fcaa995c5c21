"""What a flow run returns: :class:`FlowRunResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soloflow_core.models import ToolCall

__all__ = ["FlowRunResult"]


@dataclass(slots=True)
class FlowRunResult:
    """How a flow run ended (or paused).

    ``status``: ``completed``; ``failed``; ``fallback`` (the flow hands the task back to
    the agent: read ``handoff``); ``cancelled`` (cancelled, or its approval rejected);
    ``waiting`` (paused for approval: ``interrupt`` holds the question).
    ``state`` is the run's state-machine state.
    """

    run_id: str | None
    flow: str
    status: str
    output: Any
    results: dict[str, Any]
    errors: dict[str, str]
    steps: list[ToolCall] = field(default_factory=list)
    duration_ms: float = 0.0
    state: str | None = None
    outcome: str | None = None
    handoff: str | None = None
    interrupt: Any = None
    skipped: dict[str, str] = field(default_factory=dict)
    failed_step: str | None = None
    error: str | None = None
