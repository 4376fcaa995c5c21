"""The store's step journal on SQLite and PostgreSQL, written through the driver connection
(:class:`DriverStepJournal`): one short transaction per write, and optionally a step's
completion deferred and written with the run's next journal write (see docs/flows.md,
"Durability", and docs/glossary.md).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from soloflow_core.errors import NotFoundError
from soloflow_core.flow.fsm import StepState
from soloflow_core.flow.journal import StepBegin, idempotency_key
from soloflow_core.store.journal_io import (
    JournalSql,
    driver_statement,
    driver_transaction,
    insert_transitions,
    stamper,
)
from soloflow_core.store.json_values import json_text, storable_text
from soloflow_core.store.step_journal import (
    FinishingJournal,
    StoreStepJournal,
    begin_decision,
    finish_moves,
)
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from soloflow_core.store.database import Database

log = logging.getLogger(__name__)


_PG_SEQ = "nextval('sf_flow_transitions_id_seq')"
"""A number of the transitions' id sequence: a place in the run's history (``pos``) that no
stored row will take. The sequence is the one PostgreSQL made for the column's ``SERIAL``
(migration 0002), named as the table is, through the ``search_path``."""

_PG_BEGIN = (
    "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, started_at, "
    f"begun_at, begun_pos) SELECT id, %s, %s, 'running', 1, %s, %s, %s, {_PG_SEQ} FROM sf_flow_runs "
    "WHERE id = %s AND NOT cancel_requested ON CONFLICT (run_id, step_key) DO NOTHING RETURNING 1"
)
"""A new step's begin (none → pending → ready → running) as its row alone: the transition is
implied by ``begun_at``/``begun_pos`` (see migration 0005); no rows when the run is cancelled
or missing or the step already recorded — then the checked path runs."""

_PG_COMPLETE_SET = (
    "UPDATE sf_flow_step_runs SET state = 'completed', finished_at = %s, done_at = %s, "
    f"output = CAST(%s AS jsonb), completed_seq = {_PG_SEQ} "
    "WHERE run_id = %s AND step_key = %s AND state = 'running'"
)
_PG_COMPLETE = f"{_PG_COMPLETE_SET} RETURNING 1"
"""running → completed (PostgreSQL), the transition implied by ``done_at`` and placed by
``completed_seq``. The completion number — the order compensation undoes steps in — is drawn
from the transitions' id sequence: distinct across parallel steps without locking the run, in
the order the completions happened. Parameters: see :func:`pg_complete_params`."""

_PG_COMPLETE_THEN_BEGIN = (
    f"WITH up AS ({_PG_COMPLETE_SET} RETURNING run_id), "
    "ins AS (INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
    f"started_at, begun_at, begun_pos) SELECT id, %s, %s, 'running', 1, %s, %s, %s, {_PG_SEQ} FROM sf_flow_runs "
    "WHERE id = %s AND NOT cancel_requested AND EXISTS (SELECT 1 FROM up) "
    "ON CONFLICT (run_id, step_key) DO NOTHING RETURNING 1) "
    "SELECT (SELECT count(*) FROM up), (SELECT count(*) FROM ins)"
)
"""A deferred completion and the next step's begin in one statement (PostgreSQL); no begin when
the completion did not apply. Returns (completions, begins)."""


def pg_complete_params(run_id: str, step_key: str, *, text: str, when: datetime) -> tuple[Any, ...]:
    """The parameters of ``_PG_COMPLETE`` (and of the completion that opens the statements
    built on it): the output as JSON text, completed at ``when``."""
    return (when, when, text, run_id, step_key)


PG_COMPLETE_THEN_FINISH = (
    f"WITH up AS ({_PG_COMPLETE_SET} RETURNING run_id), "
    "fin AS (UPDATE sf_flow_runs SET status = %s, outputs = CAST(%s AS jsonb), error = %s, outcome = %s, "
    "ended_at = %s, updated_at = %s WHERE id = %s AND status = 'running' AND EXISTS (SELECT 1 FROM up) "
    "RETURNING id), "
    "tr AS (INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, detail) "
    "SELECT id, NULL, 'running', %s, %s, %s FROM fin RETURNING 1) "
    "SELECT (SELECT count(*) FROM up), (SELECT count(*) FROM tr)"
)
"""A deferred completion and the run's usual end (running → terminal) in one statement
(PostgreSQL); no end when the completion did not apply. Returns (completions, ends)."""


def pg_complete_then_finish_params(
    run_id: str,
    step_key: str,
    *,
    text: str,
    when: datetime,
    status: str,
    outputs: str,
    error: str | None,
    outcome: str | None,
    note: str | None,
) -> tuple[Any, ...]:
    """The parameters of ``PG_COMPLETE_THEN_FINISH``: the completion's, then the end's (at now)."""
    at = now()
    return (
        *pg_complete_params(run_id, step_key, text=text, when=when),
        status,
        outputs,
        error,
        outcome,
        at,
        at,
        run_id,
        status,
        at,
        note,
    )


_SQLITE_PLACE = (
    "(SELECT COALESCE(MAX(id), 0) FROM sf_flow_transitions WHERE run_id = {run}), "
    "(SELECT COALESCE(MAX(MAX(COALESCE(begun_ord, 0), COALESCE(done_ord, 0))), 0) + 1 FROM sf_flow_step_runs "
    "WHERE run_id = {run})"
)
"""The place in a run's history (``pos``, ``ord``) of a move written now (SQLite, where the
run's writes are serialised): after its last stored transition, after its implied moves."""

_SQLITE_BEGIN = (
    "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, started_at, "
    f"begun_at, begun_pos, begun_ord) SELECT r.id, ?, ?, 'running', 1, ?, ?, ?, {_SQLITE_PLACE.format(run='r.id')} "
    "FROM sf_flow_runs r WHERE r.id = ? AND NOT r.cancel_requested ON CONFLICT (run_id, step_key) DO NOTHING"
)

_SQLITE_COMPLETE = (
    "UPDATE sf_flow_step_runs SET state = 'completed', finished_at = ?, done_at = ?, output = ?, completed_seq = "
    "(SELECT COALESCE(MAX(completed_seq), 0) + 1 FROM sf_flow_step_runs WHERE run_id = ?), "
    f"(done_pos, done_ord) = ({_SQLITE_PLACE.format(run='?')}) "
    "WHERE run_id = ? AND step_key = ? AND state = 'running'"
)


class DriverStepJournal(FinishingJournal):
    """The store's journal on SQLite and PostgreSQL, written through the driver connection,
    one short transaction (on PostgreSQL often one statement) per call; SQLAlchemy's
    per-statement cost would double a step's. A step's usual begin and completion are kept
    in its own row (schema 0005) where :class:`StoreStepJournal` stores transition rows; the
    history lists both alike. The run's row is locked
    first (``BEGIN IMMEDIATE`` on SQLite, ``FOR UPDATE`` on PostgreSQL), so parallel
    steps of one run record their completion order without a race.

    With ``defer_completions`` a completion is kept in memory and written with the run's
    next journal write — usually the next step's begin, in the same transaction (one
    statement on PostgreSQL) — or by :meth:`flush`; every read flushes first. What that
    trades: a process that ends between a call's return and that write leaves the step
    ``running``; on resume it is completed from the run's checkpoint if LangGraph saved its
    output (:meth:`recovered`), and otherwise called again with the same idempotency key,
    as after a crash during the call."""

    def __init__(self, db: Database, run_id: str, *, defer_completions: bool = False) -> None:
        self._db, self.run_id = db, run_id
        self._sql = JournalSql.build(db.dialect)
        self._sqlite = db.dialect == "sqlite"
        self._stamp = stamper(db.engine)
        self._reader = StoreStepJournal(db, run_id)
        self._defer = defer_completions
        self._deferred: list[tuple[str, Any, datetime]] = []
        self._deferred_lock = threading.Lock()

    def _write(self, work: Any) -> Any:
        return self.transact(self._db, work)

    def transact(self, db: Database, work: Callable[[Any], Any]) -> Any:
        """``work`` in one write transaction on ``db``; when it is a :meth:`_flushing`
        wrapper and the transaction fails — in ``work`` or at its commit — the completions it
        took are given back, to be written by a later write. (Written again after a commit
        whose outcome is unknown, a completion finds its step completed and changes nothing.)"""
        try:
            return driver_transaction(db, self._sql, work)
        except BaseException:
            if isinstance(work, _Flush):
                work.restore()
            raise

    def _take(self) -> list[tuple[str, Any, datetime]]:
        with self._deferred_lock:
            held, self._deferred = self._deferred, []
        return held

    def _give_back(self, held: list[tuple[str, Any, datetime]]) -> None:
        with self._deferred_lock:
            self._deferred[:0] = held

    def _flushing(
        self, work: Callable[[Any], Any], held: list[tuple[str, Any, datetime]] | None = None
    ) -> Callable[[Any], Any]:
        """``work`` preceded, in its transaction, by the deferred completions (or ``held``, taken
        already). Run it with :meth:`transact`, which gives them back if the transaction fails."""
        if held is None:
            held = self._take()
        if not held:
            return work
        return _Flush(self, work, held)

    def _complete_in(self, cur: Any, held: list[tuple[str, Any, datetime]]) -> None:
        """Record ``held`` completions in the open transaction, each by the one-statement path
        when the step is running, else by the checked one."""
        for step_key, output, when in held:
            text = json_text(output)
            if self._sqlite:
                at = self._stamp(when)
                cur.execute(_SQLITE_COMPLETE, (at, at, text, *(self.run_id,) * 4, step_key))
                if cur.rowcount == 1:
                    continue
            else:
                cur.execute(
                    _PG_COMPLETE, pg_complete_params(self.run_id, step_key, text=text, when=when)
                )
                if cur.fetchall():
                    continue
            self._finish_in(cur, step_key, StepState.COMPLETED, output=output)

    def with_deferred(self, work: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``work`` preceded, in the transaction it runs in, by the deferred completions (the
        run's end uses it: one transaction for both)."""
        return self._flushing(work)

    def has_deferred(self) -> bool:
        """Whether completions are deferred."""
        with self._deferred_lock:
            return bool(self._deferred)

    def take_one_deferred(self) -> tuple[str, str, datetime] | None:
        """The deferred completion as ``(step_key, output JSON text, time)`` when exactly one is
        deferred — taken: the caller writes it or hands it back with :meth:`give_back`."""
        with self._deferred_lock:
            if len(self._deferred) != 1:
                return None
            ((step_key, output, when),) = self._deferred
            self._deferred = []
        try:
            return step_key, json_text(output), when
        except BaseException:
            self._give_back([(step_key, output, when)])
            raise

    def give_back(self, step_key: str, text: str, when: datetime) -> None:
        """Hand back what :meth:`take_one_deferred` took (its statement did not record it)."""
        self._give_back([(step_key, json.loads(text), when)])

    def flush(self) -> None:
        self._flush_deferred()

    def _flush_deferred(self) -> None:
        held = self._take()
        if not held:
            return
        if not self._sqlite and len(held) == 1:  # the usual case: one statement
            step_key, output, when = held[0]
            try:
                if driver_statement(
                    self._db,
                    _PG_COMPLETE,
                    pg_complete_params(self.run_id, step_key, text=json_text(output), when=when),
                ):
                    return
            except BaseException:
                self._give_back(held)
                raise
        self._give_back(held)
        self._write(self._flushing(lambda cur: None))

    def _rows(
        self, step_key: str, *, moves: Sequence[tuple[str | None, str]], detail: str | None, at: Any
    ) -> list[tuple[Any, ...]]:
        text = None if detail is None else storable_text(detail)
        return [(self.run_id, step_key, a, b, at, text) for a, b in moves]

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        key = idempotency_key(self.run_id, step_key)
        sql = self._sql
        if not self._sqlite and self._begin_new(step_key, step_id, self._take()):
            return StepBegin.start(key, attempt=1)

        def work(cur: Any) -> StepBegin:
            # SQLite, a new step of a live run: one insert, no read.
            if self._sqlite and self._sqlite_begin_new(
                cur, step_key, step_id=step_id, at=self._stamp(now())
            ):
                return StepBegin.start(key, attempt=1)
            cur.execute(sql.begin_read, (step_key, self.run_id))
            row = cur.fetchone()
            if row is None:
                raise NotFoundError(f"no flow run {self.run_id!r}")
            cancel, state, attempts, output, error = row
            # SQLite hands back the JSON text; psycopg has decoded the jsonb already (a
            # string output is a str that is not JSON text).
            done = self._sqlite and state in (StepState.COMPLETED, StepState.COMPENSATED)
            start = begin_decision(
                self.run_id,
                step_key,
                recorded=(cancel, state, attempts),
                output=_json_load(output) if done else output,
                error=error,
            )
            if isinstance(start, StepBegin):
                return start
            at = self._stamp(now())
            cur.execute(
                sql.upsert_running, (self.run_id, step_key, step_id, start.attempt, key, at)
            )
            rows = self._rows(step_key, moves=start.moves, detail=start.detail, at=at)
            insert_transitions(cur, sql, rows)
            return StepBegin.start(key, attempt=start.attempt)

        return cast("StepBegin", self._write(self._flushing(work)))

    def _sqlite_begin_new(self, cur: Any, step_key: str, *, step_id: str, at: Any) -> bool:
        """Record a new step of a live run as running (SQLite, in the open transaction);
        whether it applied (False: the run is cancelled or missing, or the step was recorded
        before — the checked path then decides)."""
        cur.execute(
            _SQLITE_BEGIN,
            (step_key, step_id, idempotency_key(self.run_id, step_key), at, at, self.run_id),
        )
        return cast("bool", cur.rowcount == 1)

    def _begin_new(
        self, step_key: str, step_id: str, held: list[tuple[str, Any, datetime]]
    ) -> bool:
        """Record a new step of a live run as running by the one-statement path (PostgreSQL),
        preceded by ``held`` completions; whether it applied (False: the run is cancelled or
        missing, or the step was recorded before — the checked path then decides). ``held``
        is written, or given back when it could not be."""
        if len(held) > 1:  # parallel steps completed: theirs and the begin in one transaction
            statement, params = self._pg_begin(step_key, step_id, [])

            def begin_after(cur: Any) -> bool:
                cur.execute(statement, params)
                return bool(cur.fetchall())

            return bool(self._write(self._flushing(begin_after, held)))
        statement, params = self._pg_begin(step_key, step_id, held)
        try:
            rows = driver_statement(self._db, statement, params)
        except BaseException:
            self._give_back(held)
            raise
        return self._pg_begun(rows, held)

    def _pg_begin(
        self, step_key: str, step_id: str, held: list[tuple[str, Any, datetime]]
    ) -> tuple[str, tuple[Any, ...]]:
        """The one statement (PostgreSQL) that begins a new step, after at most one held
        completion; its rows are read by :meth:`_pg_begun`."""
        key, at = idempotency_key(self.run_id, step_key), now()
        if not held:
            return _PG_BEGIN, (step_key, step_id, key, at, at, self.run_id)
        ((done_key, output, when),) = held
        return _PG_COMPLETE_THEN_BEGIN, (
            *pg_complete_params(self.run_id, done_key, text=json_text(output), when=when),
            step_key,
            step_id,
            key,
            at,
            at,
            self.run_id,
        )

    def _pg_begun(self, rows: list[tuple[Any, ...]], held: list[tuple[str, Any, datetime]]) -> bool:
        """Whether :meth:`_pg_begin`'s statement began the step; a completion it did not
        apply is given back (the checked path records it first)."""
        if not held:
            return bool(rows)
        completed, begun = rows[0]
        if not completed:
            self._give_back(held)
            return False
        return bool(begun)

    def _finish_in(
        self,
        cur: Any,
        step_key: str,
        state: StepState,
        *,
        output: Any = None,
        error: str | None = None,
        step_id: str | None = None,
        detail: str | None = None,
        then: StepState | None = None,
    ) -> None:
        sql = self._sql
        cur.execute(sql.finish_read, (step_key, self.run_id))
        row = cur.fetchone()
        if row is None:
            raise NotFoundError(f"no flow run {self.run_id!r}")
        current, top = row
        if current == state:
            return
        moves, final = finish_moves(self.run_id, step_key, current=current, state=state, then=then)
        at = self._stamp(now())
        done = state is StepState.COMPLETED
        seq: int | None = None
        if done and self._sqlite:  # BEGIN IMMEDIATE serialises the run's completions
            seq = int(top or 0) + 1
        elif done:  # the same numbers as the one-statement completion
            cur.execute(f"SELECT {_PG_SEQ}")
            seq = int(cur.fetchone()[0])
        out_text = json_text(output) if done else None
        err = None if error is None else storable_text(error)
        if current is None:
            cur.execute(
                sql.insert_finished,
                (
                    self.run_id,
                    step_key,
                    step_id or step_key,
                    final.value,
                    idempotency_key(self.run_id, step_key),
                    err,
                    at,
                ),
            )
        else:
            cur.execute(
                sql.update_finished, (final.value, at, out_text, seq, err, self.run_id, step_key)
            )
        insert_transitions(
            cur, sql, self._rows(step_key, moves=moves, detail=detail or error, at=at)
        )

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
        self._write(
            self._flushing(
                lambda cur: self._finish_in(
                    cur,
                    step_key,
                    state,
                    output=output,
                    error=error,
                    step_id=step_id,
                    detail=detail,
                    then=then,
                )
            )
        )

    def succeeded(self, step_key: str, output: Any) -> None:
        if self._defer:
            with self._deferred_lock:
                self._deferred.append((step_key, output, now()))
            return
        if not self._sqlite:
            at = now()
            if not driver_statement(
                self._db,
                _PG_COMPLETE,
                pg_complete_params(self.run_id, step_key, text=json_text(output), when=at),
            ):
                self._finish(step_key, StepState.COMPLETED, output=output)
            return

        def work(cur: Any) -> bool:
            # The usual case (running → completed) in one statement; anything else takes
            # the checked path. BEGIN IMMEDIATE serialises the completion sequence.
            at = self._stamp(now())
            cur.execute(
                _SQLITE_COMPLETE, (at, at, json_text(output), *(self.run_id,) * 4, step_key)
            )
            return bool(cur.rowcount == 1)

        if not self._write(work):
            self._finish(step_key, StepState.COMPLETED, output=output)

    def state_of(self, step_key: str) -> str | None:
        self.flush()
        return self._reader.state_of(step_key)

    def completed_order(self) -> list[tuple[str, str, Any]]:
        self.flush()
        return self._reader.completed_order()


class _Flush:
    """``work`` preceded by deferred completions, in one transaction (see
    :meth:`DriverStepJournal._flushing`); :meth:`restore` gives them back, once."""

    __slots__ = ("held", "journal", "restored", "work")

    def __init__(
        self,
        journal: DriverStepJournal,
        work: Callable[[Any], Any],
        held: list[tuple[str, Any, datetime]],
    ) -> None:
        self.journal, self.work, self.held = journal, work, held
        self.restored = False

    def __call__(self, cur: Any) -> Any:
        self.journal._complete_in(cur, self.held)
        return self.work(cur)

    def restore(self) -> None:
        if not self.restored:
            self.restored = True
            self.journal._give_back(self.held)


def _json_load(text: Any) -> Any:
    if text is None or not isinstance(text, str):
        return text
    return json.loads(text)
