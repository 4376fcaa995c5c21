"""Learning triggers: whether a finished run may teach a flow, and learning within a time budget.

A run teaches a flow only when all of these hold (:func:`should_learn`):

1. learning is enabled (``enabled``);
2. the task completed: ``run.success`` is True, or unknown (None) on a run that ended
   (``ended_at`` set); a failed run, or one neither known to succeed nor to have ended, does not;
3. it holds ≥ ``min_steps_to_learn`` consecutive successful tool calls (a call with
   ``error`` True breaks the streak; ``error`` None — not recorded — counts as success);
4. with no more than ``learning_window`` between two calls of that streak (a longer gap
   breaks it, as a failure does).

Calls carry no timestamps in the ledger, so the gap between two calls is, best first:

- exact, when both calls have ``meta["started_at"]`` (and ``meta["ended_at"]``, else start +
  ``duration_ms``) as datetimes or ISO strings: next start − previous end;
- estimated from the model turns, when the run's model calls asked for exactly its tool
  calls and all have a ``duration_ms``: the gap before the first call of a turn is the time
  of the model calls since the previous turn; calls of one turn (parallel) have no gap;
- bounded by the run: when ``ended_at − started_at`` ≤ ``learning_window`` no gap can exceed it;
- otherwise not checked: the decision passes and says so in ``notes``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from soloflow_core.learning.config import format_duration
from soloflow_core.models.ledger import utc_instant

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.models import TaskRun, ToolCall

__all__ = ["LearningAttempt", "LearningDecision", "run_learning", "should_learn"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LearningDecision:
    """Whether a run may teach a flow, and why not.

    Truthy exactly when ``learn`` is.
    """

    learn: bool
    reasons: tuple[str, ...] = ()
    """One sentence per trigger that failed (empty when ``learn``)."""
    notes: tuple[str, ...] = ()
    """What was assumed rather than checked (e.g. no timing recorded)."""
    span: tuple[int, int] | None = None
    """``(start, stop)`` indexes (0-based, stop exclusive) of the longest qualifying streak
    of tool calls, when one qualifies: the calls to learn from."""

    def __bool__(self) -> bool:
        return self.learn


def should_learn(run: TaskRun, config: LearningConfig) -> LearningDecision:
    """Check every learning trigger on a finished run; the reasons name each one that failed.

    Call numbers in the reasons are 1-based.
    """
    reasons: list[str] = []
    notes: list[str] = []
    if not config.enabled:
        reasons.append("learning is disabled (enabled=false)")
    completed = _completion_problem(run)
    if completed:
        reasons.append(completed)
    gaps, how = _gaps(run, config.learning_window)
    if how:
        notes.append(how)
    span, streak_reasons = _streak(run.tool_calls, gaps, config)
    reasons.extend(streak_reasons)
    if reasons:
        return LearningDecision(False, reasons=tuple(reasons), notes=tuple(notes))
    return LearningDecision(True, reasons=(), notes=tuple(notes), span=span)


def _completion_problem(run: TaskRun) -> str | None:
    if run.success is False:
        return "the task did not complete (success=false)"
    if run.success is None and run.ended_at is None:
        return "the task is not known to have completed (success and ended_at are unset)"
    return None


def _streak(
    calls: Sequence[ToolCall], gaps: Sequence[float | None], config: LearningConfig
) -> tuple[tuple[int, int] | None, list[str]]:
    """The longest run of successful calls unbroken by a too-long gap, and why it is too short."""
    need, window = config.min_steps_to_learn, config.learning_window
    best = (0, 0)
    best_untimed = 0  # the longest ignoring gaps: tells whether timing is what failed
    start = untimed_start = 0
    for i, call in enumerate(calls):
        if call.error is True:
            start = untimed_start = i + 1
            continue
        gap = gaps[i] if i > 0 else None
        if i > start and gap is not None and gap > window:
            start = i
        best = max(best, (start, i + 1), key=lambda s: s[1] - s[0])
        best_untimed = max(best_untimed, i + 1 - untimed_start)
    length = best[1] - best[0]
    if length >= need:
        return best, []
    if best_untimed >= need:
        breaks = [
            f"{format_duration(g)} gap between call {i} ({calls[i - 1].name}) and call {i + 1} "
            f"({calls[i].name}) exceeds learning_window={format_duration(window)}"
            for i, g in enumerate(gaps)
            if i > 0
            and g is not None
            and g > window
            and calls[i].error is not True
            and calls[i - 1].error is not True
        ]
        return None, [
            *breaks,
            f"only {length} consecutive successful tool calls within learning_window="
            f"{format_duration(window)} (min_steps_to_learn={need})",
        ]
    failed = [f"call {i + 1} ({c.name}) failed" for i, c in enumerate(calls) if c.error is True]
    return None, [
        f"only {length} consecutive successful tool calls (min_steps_to_learn={need})"
        + (f": {', '.join(failed)}" if failed else "")
    ]


# --------------------------------------------------------------------------- timing


def _gaps(run: TaskRun, window: float) -> tuple[list[float | None], str | None]:
    """Seconds between each call and the one before it (index 0: None), and a note on how
    they were found when it is less than exact."""
    calls = run.tool_calls
    exact = _exact_gaps(calls)
    if all(g is not None for g in exact[1:]):
        return exact, None
    turns = _turn_gaps(run)
    if turns is not None:
        merged = [e if e is not None else t for e, t in zip(exact, turns, strict=True)]
        return merged, "gaps between calls estimated from model-call durations"
    if run.started_at is not None and run.ended_at is not None:
        span = (run.ended_at - run.started_at).total_seconds()
        if span <= window:
            return exact, None  # the run is shorter than the window: no gap can exceed it
    if len(calls) < 2:
        return exact, None
    return exact, (
        "learning_window not checked: calls have no timestamps "
        "(ToolCall.meta['started_at']) and the run's timing cannot bound the gaps"
    )


def _exact_gaps(calls: Sequence[ToolCall]) -> list[float | None]:
    gaps: list[float | None] = [None] * len(calls)
    for i in range(1, len(calls)):
        prev, cur = calls[i - 1], calls[i]
        prev_start = utc_instant(prev.meta.get("started_at"))
        cur_start = utc_instant(cur.meta.get("started_at"))
        if prev_start is None or cur_start is None:
            continue
        prev_end = utc_instant(prev.meta.get("ended_at"))
        end = (
            prev_end.timestamp()
            if prev_end is not None
            else prev_start.timestamp() + (prev.duration_ms or 0.0) / 1000
        )
        gaps[i] = max(0.0, cur_start.timestamp() - end)  # parallel calls overlap: no gap
    return gaps


def _turn_gaps(run: TaskRun) -> list[float | None] | None:
    """Gaps from the model turns, when the model calls asked for exactly the run's calls."""
    models = run.model_calls
    if not models or sum(m.tool_calls_requested for m in models) != len(run.tool_calls):
        return None
    if any(m.duration_ms is None for m in models):
        return None
    gaps: list[float | None] = [None] * len(run.tool_calls)
    index, waited = 0, 0.0
    for m in models:
        waited += (m.duration_ms or 0.0) / 1000
        if m.tool_calls_requested == 0:
            continue
        for k in range(m.tool_calls_requested):
            if index > 0:
                gaps[index] = waited if k == 0 else 0.0
            index += 1
        waited = 0.0
    return gaps


# --------------------------------------------------------------------------- the time budget


@dataclass(slots=True)
class LearningAttempt(Generic[T]):
    """What became of a learning step run under ``learning_timeout``."""

    status: Literal["done", "timed_out", "failed"]
    value: T | None = None
    """The learning callable's result, when ``done``."""
    error: BaseException | None = None
    """What it raised, when ``failed``."""
    elapsed: float = 0.0
    """Seconds the caller waited."""
    future: Future[T] = field(default_factory=Future)
    """The work itself: after a time-out it may still finish in the background."""

    @property
    def timed_out(self) -> bool:
        return self.status == "timed_out"


def run_learning(
    learn: Callable[[], T], config: LearningConfig, *, name: str = "soloflow-learn"
) -> LearningAttempt[T]:
    """Run ``learn()`` on a worker thread and wait at most ``config.learning_timeout``.

    The agent is never held longer than the timeout and never sees the callable's
    exception (it is logged and returned as ``failed``). On a time-out the work is not
    cancelled — Python threads cannot be — it keeps running on a daemon thread and its
    result lands in ``attempt.future``; make ``learn`` idempotent and cheap to abandon.

    >>> from soloflow_core.learning import LearningConfig
    >>> run_learning(lambda: 42, LearningConfig()).value
    42
    """
    future: Future[T] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(learn())
        except BaseException as exc:  # reported to the caller, never raised into the agent
            future.set_exception(exc)

    began = time.perf_counter()
    threading.Thread(target=work, name=name, daemon=True).start()
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    finished = done.wait(config.learning_timeout)
    elapsed = time.perf_counter() - began
    if not finished:
        log.warning(
            "SoloFlow learning gave up after %s (learning_timeout); it continues in the background",
            format_duration(config.learning_timeout),
        )
        return LearningAttempt("timed_out", elapsed=elapsed, future=future)
    exc = future.exception()
    if exc is not None:
        log.error("SoloFlow learning failed", exc_info=exc)
        return LearningAttempt("failed", error=exc, elapsed=elapsed, future=future)
    return LearningAttempt("done", value=future.result(), elapsed=elapsed, future=future)
