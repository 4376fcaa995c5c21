"""The step journals of the store: where a flow run's steps record their state.

:class:`~soloflow_core.store.driver_journal.DriverStepJournal` (SQLite and PostgreSQL) writes
through the driver connection, one short transaction per call; :class:`StoreStepJournal` is the
SQLAlchemy version, used for reads and for other databases. This module holds what both share:
the checked moves of a step and the SQLAlchemy journal. Both check every move against
:mod:`soloflow_core.flow.fsm`; the SQLAlchemy journal records each in ``sf_flow_transitions``,
the driver journal keeps a step's usual begin and completion in the step's row instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from soloflow_core.flow.fsm import StepState, check_step_transition
from soloflow_core.flow.journal import RERUN, StepBegin, StepJournal, idempotency_key
from soloflow_core.store import schema as t
from soloflow_core.store.json_values import jsonable, storable_text
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from soloflow_core.store.database import Database


def _transition_row(
    run_id: str,
    step_key: str | None,
    *,
    old: str | None,
    new: str,
    detail: str | None,
    at: datetime,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step_key": step_key,
        "from_state": old,
        "to_state": new,
        "at": at,
        "detail": None if detail is None else storable_text(detail),
    }


class FinishingJournal(StepJournal):
    """The moves after ``begin``, in terms of one ``_finish`` each journal implements."""

    def _finish(
        self,
        step_key: str,
        state: StepState,
        *,
        output: Any = None,
        error: str | None = None,
        step_id: str | None = None,
        detail: str | None = None,
        then: StepState | None = None,
    ) -> None:
        raise NotImplementedError("implement _finish(step_key, state, ...)")

    def failed(self, step_key: str, error: str, *, retry: bool) -> None:
        self._finish(
            step_key, StepState.FAILED, error=error, then=StepState.READY if retry else None
        )

    def skipped(self, step_key: str, step_id: str, reason: str) -> None:
        self._finish(step_key, StepState.SKIPPED, step_id=step_id, detail=reason)

    def compensated(self, step_key: str, detail: str) -> None:
        self._finish(step_key, StepState.COMPENSATED, detail=detail)

    def recovered(self, step_key: str, output: Any) -> None:
        self._finish(step_key, StepState.COMPLETED, output=output, detail=RECOVERED)


RECOVERED = "the process ended after the call returned; output recovered from the run's checkpoint"
"""The detail of a completion recorded on resume from the checkpoint (see ``recovered``)."""


class StoreStepJournal(FinishingJournal):
    """A :class:`StepJournal` in the store: each call is one short transaction."""

    def __init__(self, db: Database, run_id: str) -> None:
        self._db, self.run_id = db, run_id

    def _step(self, conn: Connection, step_key: str) -> Any:
        s = t.flow_step_runs.c
        return conn.execute(
            sa.select(s.state, s.attempts, s.output, s.completed_seq, s.error).where(
                s.run_id == self.run_id, s.step_key == step_key
            )
        ).first()

    def _moves(
        self,
        conn: Connection,
        step_key: str,
        *,
        moves: Sequence[tuple[str | None, str]],
        detail: str | None,
        at: datetime,
    ) -> None:
        conn.execute(
            sa.insert(t.flow_transitions),
            [
                _transition_row(self.run_id, step_key, old=a, new=b, detail=detail, at=at)
                for a, b in moves
            ],
        )

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        key = idempotency_key(self.run_id, step_key)
        at = now()
        s = t.flow_step_runs.c
        with self._db.write() as conn:
            cancel = bool(
                conn.execute(
                    sa.select(t.flow_runs.c.cancel_requested).where(t.flow_runs.c.id == self.run_id)
                ).scalar()
            )
            row = self._step(conn, step_key)
            recorded = (cancel, None, None) if row is None else (cancel, row.state, row.attempts)
            start = begin_decision(
                self.run_id,
                step_key,
                recorded=recorded,
                output=None if row is None else row.output,
                error=None if row is None else row.error,
            )
            if isinstance(start, StepBegin):
                return start
            if row is None:
                conn.execute(
                    sa.insert(t.flow_step_runs).values(
                        run_id=self.run_id,
                        step_key=step_key,
                        step_id=step_id,
                        state=StepState.RUNNING.value,
                        attempts=1,
                        idempotency_key=key,
                        started_at=at,
                    )
                )
            else:
                conn.execute(
                    sa.update(t.flow_step_runs)
                    .where(s.run_id == self.run_id, s.step_key == step_key)
                    .values(state=StepState.RUNNING.value, attempts=start.attempt, started_at=at)
                )
            self._moves(conn, step_key, moves=start.moves, detail=start.detail, at=at)
            conn.execute(
                sa.update(t.flow_runs).where(t.flow_runs.c.id == self.run_id).values(updated_at=at)
            )
        return StepBegin.start(key, attempt=start.attempt)

    def _finish(
        self,
        step_key: str,
        state: StepState,
        *,
        output: Any = None,
        error: str | None = None,
        step_id: str | None = None,
        detail: str | None = None,
        then: StepState | None = None,
    ) -> None:
        at = now()
        s = t.flow_step_runs.c
        with self._db.write() as conn:
            row = self._step(conn, step_key)
            current = None if row is None else row.state
            if current == state:
                return
            moves, final = finish_moves(
                self.run_id, step_key, current=current, state=state, then=then
            )
            values: dict[str, Any] = {"state": final.value, "finished_at": at}
            if state is StepState.COMPLETED:
                values["output"] = jsonable(output)
                values["completed_seq"] = _next_seq(conn, self.run_id)
            if error is not None:
                values["error"] = storable_text(error)
            if row is None:
                conn.execute(
                    sa.insert(t.flow_step_runs).values(
                        run_id=self.run_id,
                        step_key=step_key,
                        step_id=step_id or step_key,
                        attempts=0,
                        idempotency_key=idempotency_key(self.run_id, step_key),
                        **values,
                    )
                )
            else:
                conn.execute(
                    sa.update(t.flow_step_runs)
                    .where(s.run_id == self.run_id, s.step_key == step_key)
                    .values(**values)
                )
            self._moves(conn, step_key, moves=moves, detail=detail or error, at=at)

    def succeeded(self, step_key: str, output: Any) -> None:
        self._finish(step_key, StepState.COMPLETED, output=output)

    def state_of(self, step_key: str) -> str | None:
        with self._db.read() as conn:
            row = self._step(conn, step_key)
        return None if row is None else row.state

    def completed_order(self) -> list[tuple[str, str, Any]]:
        s = t.flow_step_runs.c
        with self._db.read() as conn:
            rows = conn.execute(
                sa.select(s.step_key, s.step_id, s.output)
                .where(s.run_id == self.run_id, s.completed_seq.is_not(None))
                .order_by(s.completed_seq)
            ).all()
        return [(r[0], r[1], r[2]) for r in rows]


def _next_seq(conn: Connection, run_id: str) -> int:
    s = t.flow_step_runs.c
    top = conn.execute(sa.select(sa.func.max(s.completed_seq)).where(s.run_id == run_id)).scalar()
    return int(top or 0) + 1


def finish_moves(
    run_id: str, step_key: str, *, current: str | None, state: StepState, then: StepState | None
) -> tuple[list[tuple[str | None, str]], StepState]:
    """The checked transitions from ``current`` to ``state`` (then to ``then``), and the
    state the step ends in. A step skipped before it was ever recorded passes ``pending``."""
    moves: list[tuple[str | None, str]] = []
    if state is StepState.SKIPPED and current is None:
        moves.append((None, StepState.PENDING.value))
        current = StepState.PENDING.value
    check_step_transition(run_id, step_key, current=current, new=state)
    moves.append((current, state.value))
    if then is None:
        return moves, state
    check_step_transition(run_id, step_key, current=state, new=then)
    moves.append((state.value, then.value))
    return moves, then


class StepStart(NamedTuple):
    """What a step's begin records when the step is to run."""

    moves: list[tuple[str | None, str]]
    attempt: int
    detail: str | None
    """:data:`~soloflow_core.flow.journal.RERUN` when the step was left running."""


def begin_decision(
    run_id: str,
    step_key: str,
    *,
    recorded: tuple[bool, str | None, int | None],
    output: Any,
    error: str | None = None,
) -> StepBegin | StepStart:
    """What a step's begin does, given the run's cancel flag and the step's recorded state
    and attempts (``recorded``; state None: not recorded yet): a completed step is not run
    again (its ``output`` is reused; a compensated one completed too), nor is a step that
    failed for good (state ``failed``: a failure with a retry left is ``ready``; its recorded
    ``error`` is given back), a step of a cancelled run does not start, any other starts its
    next attempt."""
    cancel, state, attempts = recorded
    key = idempotency_key(run_id, step_key)
    if state in (StepState.COMPLETED, StepState.COMPENSATED):  # compensated: it completed
        return StepBegin.completed_before(key, output=output, attempt=attempts or 0)
    if state == StepState.FAILED:
        return StepBegin.failed_before(key, error=error or "", attempt=attempts or 0)
    if cancel:
        return StepBegin.run_cancelled(key)
    return StepStart(
        moves=begin_moves(run_id, step_key, state),
        attempt=(attempts or 0) + 1,
        detail=RERUN if state == StepState.RUNNING else None,
    )


def begin_moves(run_id: str, step_key: str, current: str | None) -> list[tuple[str | None, str]]:
    """The transitions that take a step from ``current`` to ``running`` (a step ``failed`` for
    good is not begun again: :func:`begin_decision`)."""
    if current is None:
        return list(_NEW_STEP_MOVES)
    if current == StepState.RUNNING:
        # The process that ran it ended mid-call: the attempt counts as failed.
        return [
            (StepState.RUNNING.value, StepState.FAILED.value),
            (StepState.FAILED.value, StepState.READY.value),
            (StepState.READY.value, StepState.RUNNING.value),
        ]
    if current == StepState.READY:
        return [(StepState.READY.value, StepState.RUNNING.value)]
    check_step_transition(run_id, step_key, current=current, new=StepState.RUNNING)
    raise AssertionError("unreachable")


_NEW_STEP_MOVES: list[tuple[str | None, str]] = [(None, StepState.RUNNING.value)]
"""A new step's begin — none → pending → ready → running — as one row: no other move goes
from nothing to ``running``, so ``FlowRunRepository.flow_run_history`` lists it as the three."""
