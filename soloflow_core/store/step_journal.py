"""The step journals of the store: where a flow run's steps record their state.

:class:`DriverStepJournal` (SQLite and PostgreSQL) writes through the driver connection,
one short transaction per call; :class:`StoreStepJournal` is the SQLAlchemy version, used
for reads and for other databases. Both check every move against
:mod:`soloflow_core.flow.fsm` and record it in ``sf_flow_transitions``.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.errors import NotFoundError, StoreError
from soloflow_core.flow.fsm import StepState, check_step_transition
from soloflow_core.flow.journal import StepBegin, StepJournal, idempotency_key
from soloflow_core.store import schema as t
from soloflow_core.store.writer import json_text, jsonable, now, storable_text

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine


def _transition_row(run_id: str, step_key: str | None, old: str | None, new: str,
                    detail: str | None, at: datetime) -> dict[str, Any]:
    return {"run_id": run_id, "step_key": step_key, "from_state": old, "to_state": new,
            "at": at, "detail": None if detail is None else storable_text(detail)}


class _Finishing(StepJournal):
    """The moves after ``begin``, in terms of one ``_finish`` each journal implements."""

    def _finish(self, step_key: str, state: StepState, *, output: Any = None, error: str | None = None,
                step_id: str | None = None, detail: str | None = None, then: StepState | None = None) -> None:
        raise NotImplementedError("implement _finish(step_key, state, ...)")

    def failed(self, step_key: str, error: str, *, retry: bool) -> None:
        self._finish(step_key, StepState.FAILED, error=error, then=StepState.READY if retry else None)

    def skipped(self, step_key: str, step_id: str, reason: str) -> None:
        self._finish(step_key, StepState.SKIPPED, step_id=step_id, detail=reason)

    def compensated(self, step_key: str, detail: str) -> None:
        self._finish(step_key, StepState.COMPENSATED, detail=detail)

    def recovered(self, step_key: str, output: Any) -> None:
        self._finish(step_key, StepState.COMPLETED, output=output, detail=RECOVERED)


RECOVERED = "the process ended after the call returned; output recovered from the run's checkpoint"
"""The detail of a completion recorded on resume from the checkpoint (see ``recovered``)."""


class StoreStepJournal(_Finishing):
    """A :class:`StepJournal` in the store: each call is one short transaction."""

    def __init__(self, writer: Engine, reader: Engine, run_id: str) -> None:
        self._writer, self._reader, self.run_id = writer, reader, run_id

    def _step(self, conn: Connection, step_key: str) -> Any:
        s = t.flow_step_runs.c
        return conn.execute(
            sa.select(s.state, s.attempts, s.output, s.completed_seq)
            .where(s.run_id == self.run_id, s.step_key == step_key)
        ).first()

    def _moves(self, conn: Connection, step_key: str, moves: Sequence[tuple[str | None, str]],
               detail: str | None, at: datetime) -> None:
        conn.execute(sa.insert(t.flow_transitions),
                     [_transition_row(self.run_id, step_key, a, b, detail, at) for a, b in moves])

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        key = idempotency_key(self.run_id, step_key)
        at = now()
        s = t.flow_step_runs.c
        with self._writer.begin() as conn:
            cancel = bool(conn.execute(sa.select(t.flow_runs.c.cancel_requested)
                                       .where(t.flow_runs.c.id == self.run_id)).scalar())
            row = self._step(conn, step_key)
            if row is not None and row.state == StepState.COMPLETED:
                return StepBegin(done=True, output=row.output, attempt=row.attempts,
                                 cancelled=False, idempotency_key=key)
            if cancel:
                return StepBegin(done=False, output=None, attempt=0, cancelled=True, idempotency_key=key)
            moves = _begin_moves(self.run_id, step_key, None if row is None else row.state)
            attempt = (0 if row is None else row.attempts) + 1
            if row is None:
                conn.execute(sa.insert(t.flow_step_runs).values(
                    run_id=self.run_id, step_key=step_key, step_id=step_id, state=StepState.RUNNING.value,
                    attempts=1, idempotency_key=key, started_at=at))
            else:
                conn.execute(sa.update(t.flow_step_runs)
                             .where(s.run_id == self.run_id, s.step_key == step_key)
                             .values(state=StepState.RUNNING.value, attempts=attempt, started_at=at))
            detail = "process ended during the call; running it again" if (
                row is not None and row.state == StepState.RUNNING) else None
            self._moves(conn, step_key, moves, detail, at)
            conn.execute(sa.update(t.flow_runs).where(t.flow_runs.c.id == self.run_id).values(updated_at=at))
        return StepBegin(done=False, output=None, attempt=attempt, cancelled=False, idempotency_key=key)

    def _finish(self, step_key: str, state: StepState, *, output: Any = None, error: str | None = None,
                step_id: str | None = None, detail: str | None = None, then: StepState | None = None) -> None:
        at = now()
        s = t.flow_step_runs.c
        with self._writer.begin() as conn:
            row = self._step(conn, step_key)
            current = None if row is None else row.state
            if current == state:
                return
            moves, final = _finish_moves(self.run_id, step_key, current, state, then)
            values: dict[str, Any] = {"state": final.value, "finished_at": at}
            if state is StepState.COMPLETED:
                values["output"] = jsonable(output)
                values["completed_seq"] = _next_seq(conn, self.run_id)
            if error is not None:
                values["error"] = storable_text(error)
            if row is None:
                conn.execute(sa.insert(t.flow_step_runs).values(
                    run_id=self.run_id, step_key=step_key, step_id=step_id or step_key, attempts=0,
                    idempotency_key=idempotency_key(self.run_id, step_key), **values))
            else:
                conn.execute(sa.update(t.flow_step_runs)
                             .where(s.run_id == self.run_id, s.step_key == step_key).values(**values))
            self._moves(conn, step_key, moves, detail or error, at)

    def succeeded(self, step_key: str, output: Any) -> None:
        self._finish(step_key, StepState.COMPLETED, output=output)

    def state_of(self, step_key: str) -> str | None:
        with self._reader.connect() as conn:
            row = self._step(conn, step_key)
        return None if row is None else row.state

    def completed_order(self) -> list[tuple[str, str, Any]]:
        s = t.flow_step_runs.c
        with self._reader.connect() as conn:
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


def _finish_moves(run_id: str, step_key: str, current: str | None, state: StepState,
                  then: StepState | None) -> tuple[list[tuple[str | None, str]], StepState]:
    """The checked transitions from ``current`` to ``state`` (then to ``then``), and the
    state the step ends in. A step skipped before it was ever recorded passes ``pending``."""
    moves: list[tuple[str | None, str]] = []
    if state is StepState.SKIPPED and current is None:
        moves.append((None, StepState.PENDING.value))
        current = StepState.PENDING.value
    check_step_transition(run_id, step_key, current, state)
    moves.append((current, state.value))
    if then is None:
        return moves, state
    check_step_transition(run_id, step_key, state, then)
    moves.append((state.value, then.value))
    return moves, then


def _begin_moves(run_id: str, step_key: str, current: str | None) -> list[tuple[str | None, str]]:
    """The transitions that take a step from ``current`` to ``running``."""
    if current is None:
        return list(_NEW_STEP_MOVES)
    if current == StepState.RUNNING:
        # The process that ran it ended mid-call: the attempt counts as failed.
        return [(StepState.RUNNING.value, StepState.FAILED.value),
                (StepState.FAILED.value, StepState.READY.value),
                (StepState.READY.value, StepState.RUNNING.value)]
    if current == StepState.FAILED:
        return [(StepState.FAILED.value, StepState.READY.value),
                (StepState.READY.value, StepState.RUNNING.value)]
    if current == StepState.READY:
        return [(StepState.READY.value, StepState.RUNNING.value)]
    check_step_transition(run_id, step_key, current, StepState.RUNNING)
    raise AssertionError("unreachable")


@dataclass(frozen=True, slots=True)
class JournalSql:
    """The journal's statements in one dialect's spelling."""

    begin_read: str
    finish_read: str
    upsert_running: str
    insert_finished: str
    update_finished: str
    transition: str
    insert_run: str
    run_state: str
    finish_run: str
    begin: str
    """The first statement of a write transaction (SQLite; empty on PostgreSQL)."""

    @classmethod
    def build(cls, dialect: str) -> JournalSql:
        return _journal_sql(dialect)

    @classmethod
    def _build(cls, dialect: str) -> JournalSql:
        ph, lock, json_ph = ("?", "", "?") if dialect == "sqlite" else ("%s", " FOR UPDATE OF r", "CAST(%s AS jsonb)")
        join = ("FROM sf_flow_runs r LEFT JOIN sf_flow_step_runs s ON s.run_id = r.id AND s.step_key = ? "
                "WHERE r.id = ?")
        sql = {
            "begin_read": f"SELECT r.cancel_requested, s.state, s.attempts, s.output {join}{lock}",
            "finish_read": ("SELECT s.state, (SELECT MAX(completed_seq) FROM sf_flow_step_runs "
                            f"WHERE run_id = r.id) {join}{lock}"),
            "upsert_running": (
                "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
                "started_at) VALUES (?, ?, ?, 'running', ?, ?, ?) ON CONFLICT (run_id, step_key) DO UPDATE "
                "SET state = 'running', attempts = excluded.attempts, started_at = excluded.started_at"),
            "insert_finished": (
                "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
                "error, finished_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?)"),
            "update_finished": (
                "UPDATE sf_flow_step_runs SET state = ?, finished_at = ?, output = COALESCE(JSONPH, output), "
                "completed_seq = COALESCE(?, completed_seq), error = COALESCE(?, error) "
                "WHERE run_id = ? AND step_key = ?"),
            "transition": ("INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, "
                           "detail) VALUES (?, ?, ?, ?, ?, ?)"),
            "insert_run": (
                "INSERT INTO sf_flow_runs (id, user_id, agent_id, flow_name, flow_version, status, inputs, "
                "started_at, updated_at, owner, definition, cancel_requested) "
                "VALUES (?, ?, ?, ?, ?, 'running', JSONPH, ?, ?, ?, JSONPH, FALSE)"),
            "run_state": f"SELECT r.status FROM sf_flow_runs r WHERE r.id = ?{lock}",
            "finish_run": ("UPDATE sf_flow_runs SET status = ?, outputs = JSONPH, error = ?, outcome = ?, "
                           "ended_at = ?, updated_at = ? WHERE id = ?"),
        }
        done = {k: v.replace("?", ph).replace("JSONPH", json_ph) for k, v in sql.items()}
        # PostgreSQL: the journal's commits need not wait for their WAL flush. WAL is
        # flushed in order, so once LangGraph's next checkpoint (a synchronous commit) is
        # durable, every journal write before it is too; a server crash can lose only the
        # writes after the last checkpoint, whose step then runs again with the same
        # idempotency key — what a crash mid-call does anyway. SQLite's WAL with
        # synchronous=NORMAL already commits without an fsync.
        return cls(begin="BEGIN IMMEDIATE" if dialect == "sqlite" else "", **done)


@functools.cache
def _journal_sql(dialect: str) -> JournalSql:
    return JournalSql._build(dialect)


def insert_transitions(cur: Any, sql: JournalSql, rows: list[tuple[Any, ...]]) -> None:
    """The rows in one statement (one round trip on PostgreSQL)."""
    if len(rows) == 1 or sql.begin:  # SQLite: executemany costs no round trip
        cur.executemany(sql.transition, rows)
        return
    head, _, values = sql.transition.partition(" VALUES ")
    cur.execute(head + " VALUES " + ", ".join([values] * len(rows)), [v for r in rows for v in r])


def stamper(engine: Engine) -> Callable[[datetime], Any]:
    """A timestamp as the driver takes it: SQLAlchemy's text form on SQLite, as is on
    PostgreSQL."""
    dialect = engine.dialect
    hit = _STAMPERS.get(dialect.name)
    if hit is None:
        if dialect.name == "sqlite":
            bind = t.TS.dialect_impl(dialect).bind_processor(dialect)
            assert bind is not None
            hit = bind
        else:
            hit = _as_is
        _STAMPERS[dialect.name] = hit
    return hit


def _as_is(at: datetime) -> Any:
    return at


_STAMPERS: dict[str, Callable[[datetime], Any]] = {}


_SQLITE_LOCKS: weakref.WeakKeyDictionary[Engine, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _sqlite_lock(engine: Engine) -> threading.Lock:
    with _LOCKS_GUARD:
        lock = _SQLITE_LOCKS.get(engine)
        if lock is None:
            lock = _SQLITE_LOCKS[engine] = threading.Lock()
        return lock


class _SqliteWriter:
    """The journal's SQLite write connection. Its commits do not checkpoint the WAL (SQLite
    would copy ~1,000 pages into the database file and fsync it inside some step's commit);
    after every :data:`CHECKPOINT_EVERY` commits a thread of its own, on its own connection,
    checkpoints instead: the bulk while steps go on committing, the tail holding the journal's
    lock briefly so the checkpoint completes and the WAL restarts. Other connections, in this
    process or others, keep SQLite's automatic checkpoints."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.raw: Any = engine.raw_connection()
        conn: Any = self.raw.driver_connection
        self.conn = conn
        db = engine.url.database
        self.background = bool(db) and db != ":memory:" and not str(db).startswith("file::memory:")
        if self.background:
            try:
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            except sqlite3.Error as exc:
                self.raw.close()
                raise StoreError(f"flow-run store: cannot set up the journal's connection: {exc}") from exc
        self.commits = 0
        self.wake = threading.Event()
        self.closing = False
        self.thread: threading.Thread | None = None

    def committed(self) -> None:
        self.commits += 1
        if not self.background or self.commits % CHECKPOINT_EVERY:
            return
        if self.thread is None:
            self.thread = threading.Thread(target=self._checkpoints, name="soloflow-wal-checkpoint",
                                           daemon=True)
            self.thread.start()
        self.wake.set()

    def _checkpoints(self) -> None:
        try:
            raw = self.engine.raw_connection()
        except Exception:  # no connection now: the next wake-up starts a new thread
            self.thread = None
            return
        conn: Any = raw.driver_connection
        try:
            while True:
                self.wake.wait()
                self.wake.clear()
                if self.closing:
                    return
                try:
                    # The bulk while the journal goes on writing; then the few frames written
                    # meanwhile with the journal held, so the checkpoint completes and the next
                    # commit starts the WAL from its beginning (else it would grow for good).
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    with _sqlite_lock(self.engine):
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # busy or closing: the next one, or SQLite's own, catches up
                    pass
        finally:
            raw.close()

    def close(self) -> None:
        """Stop the checkpoint thread (it may need the journal's lock: call this without it),
        then give the connection back to the pool as it came."""
        self.closing = True
        self.wake.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
        with _sqlite_lock(self.engine):
            if self.background:
                self.conn.execute("PRAGMA wal_autocheckpoint = 1000")
            self.raw.close()


CHECKPOINT_EVERY = 200
"""Journal commits between two background WAL checkpoints (each commit adds ~4 pages)."""

_SQLITE_WRITERS: weakref.WeakKeyDictionary[Engine, _SqliteWriter] = weakref.WeakKeyDictionary()
_INHERITED: list[Any] = []


def _forget_after_fork() -> None:
    """A forked child must not use its parent's SQLite connections (SQLite's rule) nor its
    locks (one may be held by a thread that does not exist in the child): it starts afresh.
    The parent's objects are kept referenced, never used or finalised, in the child."""
    global _LOCKS_GUARD
    _INHERITED.extend(_SQLITE_WRITERS.values())
    _SQLITE_WRITERS.clear()
    _SQLITE_LOCKS.clear()
    _LOCKS_GUARD = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def release_sqlite_writer(engine: Engine) -> None:
    """Give the journal's SQLite write connection back to the pool (the store closes)."""
    with _LOCKS_GUARD:
        writer = _SQLITE_WRITERS.pop(engine, None)
    if writer is not None:
        writer.close()


def driver_transaction(engine: Engine, sql: JournalSql, work: Callable[[Any], Any]) -> Any:
    """``work(cursor)`` in one write transaction on the driver's connection (``BEGIN
    IMMEDIATE`` on SQLite)."""
    if engine.dialect.name == "sqlite":
        return _sqlite_transaction(engine, sql, work)
    raw = engine.raw_connection()
    try:
        conn: Any = raw.driver_connection
        cur = conn.cursor()
        try:  # psycopg opens the transaction itself
            out = work(cur)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            cur.close()
        return out
    except engine.dialect.dbapi.Error as exc:  # type: ignore[union-attr]
        raise StoreError(f"flow-run store write failed: {exc}") from exc
    finally:
        raw.close()


def _sqlite_transaction(engine: Engine, sql: JournalSql, work: Callable[[Any], Any]) -> Any:
    # Parallel steps of this process queue on a Python lock: SQLite's own busy handler would
    # make them sleep 1, 2, 5, 10 ... ms. Writes are serialised anyway, so they share one
    # connection, kept out of the pool until the store closes (no checkout per write).
    with _sqlite_lock(engine):
        writer = _SQLITE_WRITERS.get(engine)
        if writer is None:
            writer = _SQLITE_WRITERS[engine] = _SqliteWriter(engine)
        conn: Any = writer.conn
        cur = conn.cursor()
        try:
            cur.execute(sql.begin)
            try:
                out = work(cur)
                cur.execute("COMMIT")
                writer.committed()
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
            return out
        except sqlite3.Error as exc:
            raise StoreError(f"flow-run store write failed: {exc}") from exc
        finally:
            cur.close()


def driver_statement(engine: Engine, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """One statement through the driver; its rows. PostgreSQL: in autocommit — its own
    transaction, one round trip instead of ``BEGIN``, the statement and ``COMMIT`` each
    waiting for the server. SQLite: a read (``?`` placeholders) on the driver connection."""
    raw = engine.raw_connection()
    try:
        conn: Any = raw.driver_connection
        if engine.dialect.name == "sqlite":  # reads only: sqlite3 opens no transaction for them
            cur = conn.cursor()
            try:
                cur.execute(statement, params)
                return cur.fetchall()
            finally:
                cur.close()
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
                return cur.fetchall() if cur.description is not None else []
        finally:
            conn.autocommit = False
    except engine.dialect.dbapi.Error as exc:  # type: ignore[union-attr]
        raise StoreError(f"flow-run store write failed: {exc}") from exc
    finally:
        raw.close()


_PG_BEGIN = (
    "WITH r AS (SELECT id FROM sf_flow_runs WHERE id = %s AND NOT cancel_requested), "
    "ins AS (INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
    "started_at) SELECT id, %s, %s, 'running', 1, %s, %s FROM r "
    "ON CONFLICT (run_id, step_key) DO NOTHING RETURNING run_id) "
    "INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, detail) "
    "SELECT ins.run_id, %s, v.a, v.b, %s, NULL FROM ins CROSS JOIN (VALUES (1, NULL, 'pending'), "
    "(2, 'pending', 'ready'), (3, 'ready', 'running')) AS v(n, a, b) ORDER BY v.n RETURNING 1"
)
"""A new step's begin (none → pending → ready → running) in one statement; no rows when
the run is cancelled or missing or the step already recorded — then the checked path runs."""

_PG_SEQ = "nextval(pg_get_serial_sequence('sf_flow_transitions', 'id'))"
_PG_COMPLETE = (
    "WITH up AS (UPDATE sf_flow_step_runs SET state = 'completed', finished_at = %s, "
    f"output = CAST(%s AS jsonb), completed_seq = {_PG_SEQ} "
    "WHERE run_id = %s AND step_key = %s AND state = 'running' RETURNING run_id, completed_seq) "
    "INSERT INTO sf_flow_transitions (id, run_id, step_key, from_state, to_state, at, detail) "
    "SELECT completed_seq, run_id, %s, 'running', 'completed', %s, NULL FROM up RETURNING 1"
)
"""running → completed in one statement (PostgreSQL). The completion number is drawn from
the transitions' id sequence and is the id of the completion's own transition: distinct
across parallel steps without locking the run, in the order the completions happened."""

_PG_COMPLETE_THEN_BEGIN = (
    "WITH up AS (UPDATE sf_flow_step_runs SET state = 'completed', finished_at = %s, "
    f"output = CAST(%s AS jsonb), completed_seq = {_PG_SEQ} "
    "WHERE run_id = %s AND step_key = %s AND state = 'running' RETURNING run_id, completed_seq), "
    "done AS (INSERT INTO sf_flow_transitions (id, run_id, step_key, from_state, to_state, at, detail) "
    "SELECT completed_seq, run_id, %s, 'running', 'completed', %s, NULL FROM up RETURNING id), "
    "r AS (SELECT id FROM sf_flow_runs WHERE id = %s AND NOT cancel_requested AND EXISTS (SELECT 1 FROM done)), "
    "ins AS (INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
    "started_at) SELECT id, %s, %s, 'running', 1, %s, %s FROM r "
    "ON CONFLICT (run_id, step_key) DO NOTHING RETURNING run_id), "
    "moves AS (INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, detail) "
    "SELECT ins.run_id, %s, v.a, v.b, %s, NULL FROM ins CROSS JOIN (VALUES (1, NULL, 'pending'), "
    "(2, 'pending', 'ready'), (3, 'ready', 'running')) AS v(n, a, b) ORDER BY v.n RETURNING 1) "
    "SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM moves)"
)
"""A held completion and the next step's begin in one statement (PostgreSQL): the begin
reads ``done``, so it runs after the completion and its transitions are numbered after it;
no begin when the completion did not apply. Returns (completions, begin transitions)."""


_SQLITE_BEGIN = (
    "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, started_at) "
    "SELECT id, ?, ?, 'running', 1, ?, ? FROM sf_flow_runs WHERE id = ? AND NOT cancel_requested "
    "ON CONFLICT (run_id, step_key) DO NOTHING"
)
_NEW_STEP_MOVES: list[tuple[str | None, str]] = [
    (None, StepState.PENDING.value), (StepState.PENDING.value, StepState.READY.value),
    (StepState.READY.value, StepState.RUNNING.value)]

_SQLITE_COMPLETE = (
    "UPDATE sf_flow_step_runs SET state = 'completed', finished_at = ?, output = ?, completed_seq = "
    "(SELECT COALESCE(MAX(completed_seq), 0) + 1 FROM sf_flow_step_runs WHERE run_id = ?) "
    "WHERE run_id = ? AND step_key = ? AND state = 'running'"
)


class DriverStepJournal(_Finishing):
    """The store's journal on SQLite and PostgreSQL, written through the driver connection:
    the same rows as :class:`StoreStepJournal` in one transaction of 3–4 statements per
    call (SQLAlchemy's per-statement cost would double a step's). The run's row is locked
    first (``BEGIN IMMEDIATE`` on SQLite, ``FOR UPDATE`` on PostgreSQL), so parallel
    steps of one run record their completion order without a race.

    With ``defer_completions`` a completion is held in memory and written with the run's
    next journal write — usually the next step's begin, in the same transaction (one
    statement on PostgreSQL) — or by :meth:`flush`; every read flushes first. What that
    trades: a process that ends between a call's return and that write leaves the step
    ``running``; on resume it is completed from the run's checkpoint if LangGraph saved its
    output (:meth:`recovered`), and otherwise called again with the same idempotency key,
    as after a crash during the call."""

    def __init__(self, engine: Engine, run_id: str, *, defer_completions: bool = False) -> None:
        self._engine, self.run_id = engine, run_id
        self._sql = JournalSql.build(engine.dialect.name)
        self._sqlite = engine.dialect.name == "sqlite"
        self._stamp = stamper(engine)
        self._reader = StoreStepJournal(engine, engine, run_id)
        self._defer = defer_completions
        self._held: list[tuple[str, Any, datetime]] = []
        self._held_lock = threading.Lock()

    def _write(self, work: Any) -> Any:
        return driver_transaction(self._engine, self._sql, work)

    def _take(self) -> list[tuple[str, Any, datetime]]:
        with self._held_lock:
            held, self._held = self._held, []
        return held

    def _give_back(self, held: list[tuple[str, Any, datetime]]) -> None:
        with self._held_lock:
            self._held[:0] = held

    def _flushing(self, work: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``work`` preceded, in its transaction, by the held completions."""
        held = self._take()
        if not held:
            return work

        def both(cur: Any) -> Any:
            self._complete_in(cur, held)
            return work(cur)

        def restore_on_error(cur: Any) -> Any:
            try:
                return both(cur)
            except BaseException:
                self._give_back(held)
                raise

        return restore_on_error

    def _complete_in(self, cur: Any, held: list[tuple[str, Any, datetime]]) -> None:
        """Record ``held`` completions in the open transaction, each by the one-statement path
        when the step is running, else by the checked one."""
        for step_key, output, when in held:
            text = json_text(output)
            if self._sqlite:
                at = self._stamp(when)
                cur.execute(_SQLITE_COMPLETE, (at, text, self.run_id, self.run_id, step_key))
                if cur.rowcount == 1:
                    insert_transitions(cur, self._sql, self._rows(step_key, [("running", "completed")], None, at))
                    continue
            else:
                cur.execute(_PG_COMPLETE, (when, text, self.run_id, step_key, step_key, when))
                if cur.fetchall():
                    continue
            self._finish_in(cur, step_key, StepState.COMPLETED, output=output)

    def with_held(self, work: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``work`` preceded, in the transaction it runs in, by the completions held back (the
        run's end uses it: one transaction for both)."""
        return self._flushing(work)

    def holds(self) -> bool:
        """Whether completions are held back."""
        with self._held_lock:
            return bool(self._held)

    def take_one_held(self) -> tuple[str, str, datetime] | None:
        """The held completion as ``(step_key, output JSON text, time)`` when exactly one is
        held — taken: the caller writes it or hands it back with :meth:`give_back`."""
        with self._held_lock:
            if len(self._held) != 1:
                return None
            (step_key, output, when), = self._held
            self._held = []
        try:
            return step_key, json_text(output), when
        except BaseException:
            self._give_back([(step_key, output, when)])
            raise

    def give_back(self, step_key: str, text: str, when: datetime) -> None:
        """Hand back what :meth:`take_one_held` took (its statement did not record it)."""
        self._give_back([(step_key, json.loads(text), when)])

    def flush(self) -> None:
        held = self._take()
        if not held:
            return
        if not self._sqlite and len(held) == 1:  # the usual case: one statement
            step_key, output, when = held[0]
            try:
                if driver_statement(self._engine, _PG_COMPLETE,
                                    (when, json_text(output), self.run_id, step_key, step_key, when)):
                    return
            except BaseException:
                self._give_back(held)
                raise
        self._give_back(held)
        self._write(self._flushing(lambda cur: None))

    def _rows(self, step_key: str, moves: Sequence[tuple[str | None, str]], detail: str | None,
              at: Any) -> list[tuple[Any, ...]]:
        text = None if detail is None else storable_text(detail)
        return [(self.run_id, step_key, a, b, at, text) for a, b in moves]

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        key = idempotency_key(self.run_id, step_key)
        sql = self._sql
        if not self._sqlite:
            at = now()
            held = self._take()
            if len(held) > 1:  # parallel steps completed: all but the last on their own
                self._give_back(held[:-1])
                self.flush()
                held = held[-1:]
            if held:
                done_key, output, when = held[0]
                try:
                    rows = driver_statement(self._engine, _PG_COMPLETE_THEN_BEGIN, (
                        when, json_text(output), self.run_id, done_key, done_key, when, self.run_id,
                        step_key, step_id, key, at, step_key, at))
                except BaseException:
                    self._give_back(held)
                    raise
                completed, begun = rows[0]
                if not completed:
                    self._give_back(held)  # the checked path below records it first
                elif begun:
                    return StepBegin(False, None, 1, False, key)
            elif driver_statement(self._engine, _PG_BEGIN,
                                  (self.run_id, step_key, step_id, key, at, step_key, at)):
                return StepBegin(False, None, 1, False, key)

        def work(cur: Any) -> StepBegin:
            if self._sqlite:  # a new step of a live run: one insert, no read
                at = self._stamp(now())
                cur.execute(_SQLITE_BEGIN, (step_key, step_id, key, at, self.run_id))
                if cur.rowcount == 1:
                    insert_transitions(cur, sql, self._rows(step_key, _NEW_STEP_MOVES, None, at))
                    return StepBegin(False, None, 1, False, key)
            cur.execute(sql.begin_read, (step_key, self.run_id))
            row = cur.fetchone()
            if row is None:
                raise NotFoundError(f"no flow run {self.run_id!r}")
            cancel, state, attempts, output = row
            if state == StepState.COMPLETED:
                # SQLite hands back the JSON text; psycopg has decoded the jsonb already (a
                # string output is a str that is not JSON text).
                return StepBegin(True, _json_load(output) if self._sqlite else output, attempts, False, key)
            if cancel:
                return StepBegin(False, None, 0, True, key)
            moves = _begin_moves(self.run_id, step_key, state)
            attempt = (attempts or 0) + 1
            at = self._stamp(now())
            cur.execute(sql.upsert_running, (self.run_id, step_key, step_id, attempt, key, at))
            detail = "process ended during the call; running it again" if state == StepState.RUNNING else None
            insert_transitions(cur, sql, self._rows(step_key, moves, detail, at))
            return StepBegin(False, None, attempt, False, key)

        return self._write(self._flushing(work))

    def _finish_in(self, cur: Any, step_key: str, state: StepState, *, output: Any = None,
                   error: str | None = None, step_id: str | None = None, detail: str | None = None,
                   then: StepState | None = None) -> None:
        sql = self._sql
        cur.execute(sql.finish_read, (step_key, self.run_id))
        row = cur.fetchone()
        if row is None:
            raise NotFoundError(f"no flow run {self.run_id!r}")
        current, top = row
        if current == state:
            return
        moves, final = _finish_moves(self.run_id, step_key, current, state, then)
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
            cur.execute(sql.insert_finished, (self.run_id, step_key, step_id or step_key, final.value,
                                              idempotency_key(self.run_id, step_key), err, at))
        else:
            cur.execute(sql.update_finished, (final.value, at, out_text, seq, err, self.run_id, step_key))
        insert_transitions(cur, sql, self._rows(step_key, moves, detail or error, at))

    def _finish(self, step_key: str, state: StepState, *, output: Any = None, error: str | None = None,
                step_id: str | None = None, detail: str | None = None, then: StepState | None = None) -> None:
        self._write(self._flushing(lambda cur: self._finish_in(
            cur, step_key, state, output=output, error=error, step_id=step_id, detail=detail, then=then)))

    def succeeded(self, step_key: str, output: Any) -> None:
        if self._defer:
            with self._held_lock:
                self._held.append((step_key, output, now()))
            return
        if not self._sqlite:
            at = now()
            if not driver_statement(self._engine, _PG_COMPLETE,
                                    (at, json_text(output), self.run_id, step_key, step_key, at)):
                self._finish(step_key, StepState.COMPLETED, output=output)
            return
        sql = self._sql

        def work(cur: Any) -> bool:
            # The usual case (running → completed) in two statements; anything else takes
            # the checked path. BEGIN IMMEDIATE serialises the completion sequence.
            at = self._stamp(now())
            cur.execute(_SQLITE_COMPLETE, (at, json_text(output), self.run_id, self.run_id, step_key))
            if cur.rowcount != 1:
                return False
            insert_transitions(cur, sql, self._rows(step_key, [("running", "completed")], None, at))
            return True

        if not self._write(work):
            self._finish(step_key, StepState.COMPLETED, output=output)

    def state_of(self, step_key: str) -> str | None:
        self.flush()
        return self._reader.state_of(step_key)

    def completed_order(self) -> list[tuple[str, str, Any]]:
        self.flush()
        return self._reader.completed_order()


def _json_load(text: Any) -> Any:
    if text is None or not isinstance(text, str):
        return text
    return json.loads(text)
