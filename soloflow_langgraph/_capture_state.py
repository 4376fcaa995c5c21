"""The in-memory capture of one root run while it goes on: its tool calls, model calls and
trace, turned into a ``TaskRun`` when it ends. Private to :mod:`soloflow_langgraph.callbacks`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from soloflow_core.ledger import MAX_TOKENS
from soloflow_core.models import ModelCall, TaskRun
from soloflow_langgraph._callback_events import tool_call
from soloflow_langgraph.agent_trace import AgentTrace, DeferredAgentTrace

if TYPE_CHECKING:
    from collections.abc import Sequence

    from soloflow_core.tracing import Span

logger = logging.getLogger("soloflow_langgraph.callbacks")

NO_POSITION = 1 << 30
"""Sort position of a tool call no model asked for: after the calls a model asked for."""


@dataclass(frozen=True, slots=True)
class CaptureHealth:
    """How a :class:`SoloFlowCallbackHandler` is doing: ``handler.health()``."""

    ok: bool
    """True when the last write reached the store and nothing is waiting to be written back."""
    problem: str | None
    """What is wrong (the last problem seen), None when ``ok``."""
    runs_written: int
    """Runs this handler stored (its spilled runs once written back included)."""
    runs_spilled: int
    """Runs this handler could not store in time and appended to the spill file."""
    runs_dropped: int
    """Runs the spill file could not take (full, or not writable; each logged as an error):
    kept in ``handler.unsaved`` only, lost if the process ends before they are stored."""
    spill_path: str | None
    """The spill file (JSON lines, the ledger format), None for an in-memory store."""


@dataclass(slots=True)
class ToolCallCapture:
    name: str
    args: dict[str, Any]
    key: tuple[int, int, int]
    """(model turn, position among that turn's tool calls, start order): the stored order."""
    index: int
    started: float
    tool_call_id: str | None
    output: Any = None
    error: bool | None = None
    duration_ms: float | None = None
    meta: dict[str, Any] | None = None
    """What the tool's metadata says about its side effects (``side_effects`` /
    ``read_only``) and the flow it runs (``soloflow_flow``), when it says anything."""

    def ended(self, output: Any, *, failed: bool, ended: float, call_id: str | None) -> None:
        """The call returned ``output`` (or failed) at ``ended`` (``time.perf_counter()``)."""
        self.output = output
        self.error = failed
        self.duration_ms = (ended - self.started) * 1000
        self.tool_call_id = self.tool_call_id or call_id


@dataclass(slots=True)
class RunCapture:
    """Everything known so far about one root run."""

    root_id: UUID
    name: str | None
    task: str | None
    started_at: datetime
    members: list[int]
    """Every run id mapped to this root, removed from the map when the root ends."""
    answer: str | None = None
    """The text of the root's last AI message without tool calls (its final answer)."""
    calls: list[ToolCallCapture] = field(default_factory=list)
    open_calls: dict[int, ToolCallCapture] = field(default_factory=dict)
    open_models: dict[int, tuple[float, str | None]] = field(default_factory=dict)
    models: list[tuple[str | None, dict[str, Any] | None, float, int]] = field(default_factory=list)
    """(model name, usage, duration ms, tool calls requested) per finished model call."""
    requested: dict[str, tuple[int, int]] = field(default_factory=dict)
    """tool_call_id → (model turn, position) of each tool call a model asked for."""
    turn_base: list[int] = field(default_factory=lambda: [0])
    """turn_base[t]: how many tool calls had started when model turn t ended."""
    namespace: tuple[str | None, str | None] = (None, None)
    """(user, agent) named by the invocation's ``metadata``; None: the handler's own."""
    trace: AgentTrace | DeferredAgentTrace | None = None
    """The run's spans (``soloflow runs trace``), stored with it."""

    def model_ended(
        self,
        model: str | None,
        usage: dict[str, Any] | None,
        *,
        duration_ms: float,
        call_ids: list[str | None],
    ) -> None:
        """A model turn ended, asking for the tool calls ``call_ids`` (in that order)."""
        self.models.append((model, usage, duration_ms, len(call_ids)))
        turn = len(self.turn_base)
        self.turn_base.append(len(self.calls))
        for pos, call_id in enumerate(call_ids):
            if call_id:
                self.requested[call_id] = (turn, pos)

    def tool_started(self, key: int, call: ToolCallCapture) -> None:
        """Tool run ``key`` started: ``call`` is placed (its ``key`` and ``index`` set) and kept.

        Parallel calls start in any order on worker threads; they are stored in the order the
        model asked for them, so that the same behaviour gives the same sequence."""
        seq = len(self.calls)
        placed = self.requested.get(call.tool_call_id) if call.tool_call_id else None
        if placed is None:
            call.key, call.index = (len(self.turn_base) - 1, NO_POSITION, seq), seq
        else:
            call.key, call.index = (*placed, seq), self.turn_base[placed[0]] + placed[1]
        self.calls.append(call)
        self.open_calls[key] = call


def finished_trace(state: RunCapture, run: TaskRun, error: str | None) -> Sequence[Span]:
    """The spans of a root that ended, ``run``'s cost set from them; none when the root has
    no trace, or when making it fails (logged: the run is kept without its trace, never lost
    with it)."""
    if state.trace is None:
        return []
    try:
        spans = state.trace.finish(error)  # packed as made: the store writes it as is
        run.cost = state.trace.run_cost
    except Exception:
        logger.exception("SoloFlow capture: run %s's trace failed; run kept", run.run_id)
        return []
    return spans


def build_task_run(
    state: RunCapture,
    error: str | None,
    *,
    user_id: str,
    agent_id: str,
    routed: dict[str, Any] | None = None,
) -> TaskRun:
    """The ``TaskRun`` of a root that ended (``error``: why it failed, None if it did not);
    ``user_id`` / ``agent_id``: the handler's namespace, unless the invocation named one;
    ``routed``: the flow that answered it, kept as ``meta["routed"]``."""
    models: list[ModelCall] = []
    tokens: int | None = None
    for name, usage, ms, requested in state.models:
        u = usage or {}
        total = int(u.get("total_tokens") or 0)
        if usage:  # the run's sum held to what the ledger holds, as each count is
            tokens = min((tokens or 0) + total, MAX_TOKENS)
        models.append(
            ModelCall(
                model=name,
                input_tokens=int(u.get("input_tokens") or 0),
                output_tokens=int(u.get("output_tokens") or 0),
                total_tokens=total,
                duration_ms=ms,
                tool_calls_requested=requested,
            )
        )
    meta: dict[str, Any] = {"agent_name": state.name}
    if routed is not None:  # a flow answered: which, so the run does not look empty
        meta["routed"] = routed
    if error is not None:
        meta["error"] = error
    user_ns, agent_ns = state.namespace
    return TaskRun(
        run_id=str(state.root_id),
        user_id=user_ns or user_id,
        agent_id=agent_ns or agent_id,
        task=state.task,
        answer=state.answer,
        success=error is None,
        tokens=tokens,
        tool_calls=[tool_call(c) for c in sorted(state.calls, key=lambda c: c.key)],
        model_calls=models,
        started_at=state.started_at,
        ended_at=datetime.now(UTC),
        meta=meta,
    )
