"""Where a flow run's steps record their state: before each call, after it, and when
skipped or compensated. The runtime reads it back to never repeat a completed step.

Two implementations: :class:`InMemoryStepJournal` (one process, nothing survives it) and
the store's (``Store.step_journal(run_id)``), which makes runs durable.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from soloflow_core.flow.fsm import StepState, check_step_transition

__all__ = ["RERUN", "InMemoryStepJournal", "StepBegin", "StepJournal", "idempotency_key"]


RERUN = (
    "the run stopped (its process ended, or it was interrupted) while the step was running: during "
    "its call, or after its begin was recorded and before the call; running it again"
)
"""The detail of a step found ``running`` when its run goes on: it is called again, with the
same idempotency key (whether it had been called cannot be told from the journal)."""


def idempotency_key(run_id: str, step_key: str) -> str:
    """The key of one step of one run: the same on every attempt and after a resume, so a
    tool that accepts one can refuse to repeat a side effect."""
    return f"{run_id}:{step_key}"


@dataclass(frozen=True, slots=True)
class StepBegin:
    """What :meth:`StepJournal.begin` found."""

    done: bool
    """The step completed before (an earlier attempt of this run): don't call it again."""
    output: Any
    """With ``done``: the recorded output."""
    attempt: int
    """The attempt about to run, from 1."""
    cancelled: bool
    """The run was cancelled: don't start the step."""
    idempotency_key: str
    failed: str | None = None
    """The step failed for good in an earlier attempt (no retry was left): its error. Don't
    call it again; the step fails as it did. Set when a run is carried on by running its graph
    again from an earlier point (a resume, or a run whose checkpoints are saved only when an
    invocation ends), which reaches a step that had already failed."""

    @classmethod
    def start(cls, key: str, *, attempt: int) -> StepBegin:
        """The step is recorded running: call it (attempt ``attempt``)."""
        return cls(done=False, output=None, attempt=attempt, cancelled=False, idempotency_key=key)

    @classmethod
    def completed_before(cls, key: str, *, output: Any, attempt: int) -> StepBegin:
        """The step completed in an earlier attempt: use ``output``, don't call it again."""
        return cls(done=True, output=output, attempt=attempt, cancelled=False, idempotency_key=key)

    @classmethod
    def failed_before(cls, key: str, *, error: str, attempt: int) -> StepBegin:
        """The step failed for good in an earlier attempt: fail it with ``error`` again,
        without a call."""
        return cls(
            done=False,
            output=None,
            attempt=attempt,
            cancelled=False,
            idempotency_key=key,
            failed=error,
        )

    @classmethod
    def run_cancelled(cls, key: str) -> StepBegin:
        """The run was cancelled: the step must not start."""
        return cls(done=False, output=None, attempt=0, cancelled=True, idempotency_key=key)


class StepJournal:
    """The record of one run's steps. Implementations must be thread-safe (parallel steps
    record at the same time)."""

    run_id: str

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        """Record the step as running (``pending`` → ``ready`` → ``running``; a step left
        ``running`` by an ended process: → ``failed`` → ``ready`` → ``running``) before its
        call, or report that it completed already, that it failed for good already (it is
        ``failed``: a failure with a retry left goes back to ``ready``), or that the run was
        cancelled."""
        raise NotImplementedError("implement begin(step_key, step_id) -> StepBegin")

    def succeeded(self, step_key: str, output: Any) -> None:
        """Record the call's output: the step is ``completed``."""
        raise NotImplementedError("implement succeeded(step_key, output)")

    def failed(self, step_key: str, error: str, *, retry: bool) -> None:
        """Record a failed attempt; with ``retry`` the step goes back to ``ready``."""
        raise NotImplementedError("implement failed(step_key, error, retry=)")

    def skipped(self, step_key: str, step_id: str, reason: str) -> None:
        """Record that the step will not run, and why."""
        raise NotImplementedError("implement skipped(step_key, step_id, reason)")

    def compensated(self, step_key: str, detail: str) -> None:
        """Record that a completed step was undone by its compensation."""
        raise NotImplementedError("implement compensated(step_key, detail)")

    def state_of(self, step_key: str) -> str | None:
        """The step's state, None before it was ever recorded."""
        raise NotImplementedError("implement state_of(step_key)")

    def completed_order(self) -> list[tuple[str, str, Any]]:
        """``(step_key, step_id, output)`` of every step that completed, in completion order
        (compensated ones included)."""
        raise NotImplementedError("implement completed_order()")

    def recovered(self, step_key: str, output: Any) -> None:
        """Record as completed a step whose call returned in a process that ended before
        recording it: its output was found in the run's checkpoint, so it is not called
        again. The default records it like :meth:`succeeded`."""
        self.succeeded(step_key, output)

    def flush(self) -> None:
        """Write anything the journal deferred (see ``Store.step_journal(defer_completions=True)``).
        The runtime calls it when a run stops, finished or waiting. Default: nothing deferred."""


@dataclass(slots=True)
class _Entry:
    step_id: str
    state: StepState
    attempts: int = 0
    output: Any = None
    seq: int | None = None
    error: str | None = None


class InMemoryStepJournal(StepJournal):
    """A journal in a dict; ``transitions`` lists every move with its time."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._steps: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._seq = 0
        self.transitions: list[tuple[datetime, str, str | None, str, str | None]] = []
        self.cancel_requested = False

    def _move(
        self, step_key: str, entry: _Entry | None, *, new: StepState, detail: str | None = None
    ) -> None:
        old = None if entry is None else entry.state
        check_step_transition(self.run_id, step_key, current=old, new=new)
        self.transitions.append((datetime.now(UTC), step_key, old, new.value, detail))
        if entry is not None:
            entry.state = new

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        key = idempotency_key(self.run_id, step_key)
        with self._lock:
            e = self._steps.get(step_key)
            if e is not None and e.state in (StepState.COMPLETED, StepState.COMPENSATED):
                return StepBegin.completed_before(key, output=e.output, attempt=e.attempts)
            if e is not None and e.state is StepState.FAILED:
                return StepBegin.failed_before(key, error=e.error or "", attempt=e.attempts)
            if self.cancel_requested:
                return StepBegin.run_cancelled(key)
            if e is None:
                self.transitions.append(
                    (datetime.now(UTC), step_key, None, StepState.PENDING.value, None)
                )
                e = self._steps[step_key] = _Entry(step_id, StepState.PENDING)
            if e.state is StepState.RUNNING:
                self._move(step_key, e, new=StepState.FAILED, detail=RERUN)
            if e.state in (StepState.PENDING, StepState.FAILED):  # failed: left running
                self._move(step_key, e, new=StepState.READY)
            self._move(step_key, e, new=StepState.RUNNING)
            e.attempts += 1
            return StepBegin.start(key, attempt=e.attempts)

    def succeeded(self, step_key: str, output: Any) -> None:
        with self._lock:
            e = self._steps[step_key]
            self._move(step_key, e, new=StepState.COMPLETED)
            self._seq += 1
            e.output, e.seq = output, self._seq

    def failed(self, step_key: str, error: str, *, retry: bool) -> None:
        with self._lock:
            e = self._steps[step_key]
            self._move(step_key, e, new=StepState.FAILED, detail=error)
            e.error = error
            if retry:
                self._move(step_key, e, new=StepState.READY)

    def skipped(self, step_key: str, step_id: str, reason: str) -> None:
        with self._lock:
            e = self._steps.get(step_key)
            if e is not None and e.state is StepState.SKIPPED:
                return
            if e is None:
                self.transitions.append(
                    (datetime.now(UTC), step_key, None, StepState.PENDING.value, None)
                )
                e = self._steps[step_key] = _Entry(step_id, StepState.PENDING)
            self._move(step_key, e, new=StepState.SKIPPED, detail=reason)

    def compensated(self, step_key: str, detail: str) -> None:
        with self._lock:
            e = self._steps[step_key]
            if e.state is not StepState.COMPENSATED:
                self._move(step_key, e, new=StepState.COMPENSATED, detail=detail)

    def state_of(self, step_key: str) -> str | None:
        with self._lock:
            e = self._steps.get(step_key)
            return None if e is None else e.state.value

    def completed_order(self) -> list[tuple[str, str, Any]]:
        with self._lock:
            done = [
                (e.seq, k, e.step_id, e.output) for k, e in self._steps.items() if e.seq is not None
            ]
        return [(k, sid, out) for _, k, sid, out in sorted(done, key=lambda x: x[0] or 0)]
