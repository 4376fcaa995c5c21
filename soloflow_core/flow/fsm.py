"""The state machines of a flow run and of its steps.

A run::

    draft ──► active ──► running ──► completed
                │           ├──────► failed
                │           ├──────► cancelled
                │           ▼  ▲
                │       interrupted ──► cancelled
                └──────────────────────► cancelled, failed

``draft``: recorded, inputs not yet checked; ``active``: inputs checked, ready to start;
``running``: steps are being run (or it waits for an approval, or its process died and
``soloflow flows resume`` can carry it on); ``interrupted``: its process was stopped (Ctrl-C,
SIGTERM) and recorded so; ``soloflow flows resume`` moves it back to ``running``.

A step::

    pending ──► ready ──► running ──► completed ──► compensated
       │          │          ├──────► failed ──► ready   (a retry)
       └──────────┴──────────┴──────► skipped

Terminal states accept no transition (``completed`` of a step only its compensation).
Every transition is checked here and recorded in the store with its time.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from soloflow_core.errors import InvalidTransitionError

__all__ = [
    "RUN_TERMINAL",
    "STEP_DONE",
    "RunState",
    "StepState",
    "check_run_transition",
    "check_step_transition",
]


_S = TypeVar("_S", bound=StrEnum)


class RunState(StrEnum):
    DRAFT = "draft"
    ACTIVE = "active"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StepState(StrEnum):
    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    COMPENSATED = "compensated"


RUN_TERMINAL = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})
STEP_DONE = frozenset({StepState.COMPLETED, StepState.SKIPPED, StepState.COMPENSATED})

_RUN_NEXT: dict[RunState, frozenset[RunState]] = {
    RunState.DRAFT: frozenset({RunState.ACTIVE, RunState.CANCELLED, RunState.FAILED}),
    RunState.ACTIVE: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.FAILED}),
    RunState.RUNNING: frozenset(
        {RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED, RunState.INTERRUPTED}
    ),
    RunState.INTERRUPTED: frozenset({RunState.RUNNING, RunState.CANCELLED}),
}

_STEP_NEXT: dict[StepState, frozenset[StepState]] = {
    StepState.PENDING: frozenset({StepState.READY, StepState.SKIPPED}),
    StepState.READY: frozenset({StepState.RUNNING, StepState.SKIPPED}),
    StepState.RUNNING: frozenset({StepState.COMPLETED, StepState.FAILED, StepState.SKIPPED}),
    StepState.FAILED: frozenset({StepState.READY}),
    StepState.COMPLETED: frozenset({StepState.COMPENSATED}),
}


def check_run_transition(run_id: str, current: str | None, new: str) -> RunState:
    """``new`` as a :class:`RunState` if a run in state ``current`` may move to it.

    Raises:
        InvalidTransitionError: an unknown state, or a move the machine does not allow
            (leaving a terminal state included).
    """
    target = _state(RunState, new, f"flow run {run_id!r}")
    if current is None:
        if target is not RunState.DRAFT:
            raise InvalidTransitionError(
                f"flow run {run_id!r} must start as 'draft', not {new!r}", run_id=run_id
            )
        return target
    source = _state(RunState, current, f"flow run {run_id!r}")
    if target not in _RUN_NEXT.get(source, frozenset()):
        why = (
            "it has ended"
            if source in RUN_TERMINAL
            else f"allowed from {source.value!r}: "
            + (", ".join(sorted(s.value for s in _RUN_NEXT[source])))
        )
        raise InvalidTransitionError(
            f"flow run {run_id!r} cannot go from {source.value!r} to {target.value!r}: {why}",
            run_id=run_id,
        )
    return target


def check_step_transition(run_id: str, step_key: str, current: str | None, new: str) -> StepState:
    """``new`` as a :class:`StepState` if the step may move there from ``current``
    (None: the step has no record yet, i.e. ``pending``).

    Raises:
        InvalidTransitionError: an unknown state or a move the machine does not allow.
    """
    where = f"flow run {run_id!r}, step {step_key!r}"
    target = _state(StepState, new, where)
    source = StepState.PENDING if current is None else _state(StepState, current, where)
    if target not in _STEP_NEXT.get(source, frozenset()):
        allowed = ", ".join(sorted(s.value for s in _STEP_NEXT.get(source, frozenset()))) or "none"
        raise InvalidTransitionError(
            f"{where} cannot go from {source.value!r} to {target.value!r} (allowed: {allowed})",
            run_id=run_id,
            step=step_key,
        )
    return target


def _state(kind: type[_S], value: str, where: str) -> _S:
    try:
        return kind(value)
    except ValueError:
        raise InvalidTransitionError(
            f"{where}: unknown state {value!r}; states: {', '.join(s.value for s in kind)}"
        ) from None
