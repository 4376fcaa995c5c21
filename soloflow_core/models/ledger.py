"""What capture records: task runs, their tool calls and their model calls."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from soloflow_core.models.names import Name

DEFAULT_USER = "default"
DEFAULT_AGENT = "default"


class ToolCall(BaseModel):
    """One tool call inside a task run, in call order."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    """The tool's name, as the model called it."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The arguments as a dict (never the string form)."""
    output: Any = None
    """What the tool returned: any JSON value (a ToolMessage's content inside agents)."""
    error: bool | None = None
    """True when the call raised or the tool reported an error; None when unknown."""
    duration_ms: float | None = None
    """Wall time of the call in milliseconds, when measured."""
    tool_call_id: str | None = None
    """The model's id for the call, when there is one."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Anything else recorded about the call (unknown ledger fields land here)."""


class ModelCall(BaseModel):
    """One chat-model call inside a task run, with its token usage."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    """The model's name, when the integration reports one."""
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    duration_ms: float | None = None
    tool_calls_requested: int = 0
    """How many tool calls the model asked for in this turn."""


class TaskRun(BaseModel):
    """One top-level agent invocation: a task and what the agent did for it."""

    model_config = ConfigDict(extra="forbid")

    run_id: Name = Field(min_length=1)
    """Unique in its namespace; like the namespace's ids, no control character (see
    :mod:`soloflow_core.models.names`)."""
    user_id: Name = DEFAULT_USER
    agent_id: Name = DEFAULT_AGENT
    task: str | None = None
    """The task text: the first human message."""
    answer: str | None = None
    """The agent's final answer: the text of its last message, when it ended with one."""
    success: bool | None = None
    cost: float | None = None
    """Cost of the run in the caller's unit (USD in captured runs), when known."""
    tokens: int | None = None
    """Total tokens over all model calls, when known."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model_calls: list[ModelCall] = Field(default_factory=list)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    classification: str | None = None
    """The label a ``soloflow_classify_task`` plugin gave the task."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Anything else; unknown ledger fields land here."""

    @property
    def tool_names(self) -> list[str]:
        return [c.name for c in self.tool_calls]

    @property
    def model_call_count(self) -> int:
        return len(self.model_calls)


class StepRecord(BaseModel):
    """A finished tool call with where it happened: the payload of ``soloflow_step_finished``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    user_id: str
    agent_id: str
    index: int
    """Position of the call in its run, from 0."""
    call: ToolCall
    source: str = "agent"
    """``"agent"`` for a captured agent call, ``"flow"`` for a step of a flow run."""


def utc_instant(value: Any) -> datetime | None:
    """A timestamp as recorded (a datetime, or ISO 8601 text as SQLite or a ledger line
    keeps it) as an aware datetime in UTC; a naive one is taken as UTC; None when it is
    neither."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
