"""How the flow journal's writes reach the database: one dialect's statements
(:class:`JournalSql`), timestamps as the driver takes them (:func:`stamper`), one short
transaction or statement on the driver connection (:func:`driver_transaction`,
:func:`driver_statement`), and on SQLite one writing connection per store under the
process's lock, its WAL checkpointed in the background (:class:`_SqliteWriter`).

Used by :mod:`soloflow_core.store.driver_journal` and :mod:`soloflow_core.store.flowruns`.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from soloflow_core.errors import StoreError
from soloflow_core.store import schema as t
from soloflow_core.store.wal import WalCheckpointer

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from soloflow_core.store.database import Database


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
        ph, lock, json_ph = (
            ("?", "", "?")
            if dialect == "sqlite"
            else ("%s", " FOR UPDATE OF r", "CAST(%s AS jsonb)")
        )
        join = (
            "FROM sf_flow_runs r LEFT JOIN sf_flow_step_runs s ON s.run_id = r.id AND s.step_key = ? "
            "WHERE r.id = ?"
        )
        sql = {
            "begin_read": f"SELECT r.cancel_requested, s.state, s.attempts, s.output, s.error {join}{lock}",
            "finish_read": (
                "SELECT s.state, (SELECT MAX(completed_seq) FROM sf_flow_step_runs "
                f"WHERE run_id = r.id) {join}{lock}"
            ),
            "upsert_running": (
                "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
                "started_at) VALUES (?, ?, ?, 'running', ?, ?, ?) ON CONFLICT (run_id, step_key) DO UPDATE "
                "SET state = 'running', attempts = excluded.attempts, started_at = excluded.started_at"
            ),
            "insert_finished": (
                "INSERT INTO sf_flow_step_runs (run_id, step_key, step_id, state, attempts, idempotency_key, "
                "error, finished_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?)"
            ),
            "update_finished": (
                "UPDATE sf_flow_step_runs SET state = ?, finished_at = ?, output = COALESCE(JSONPH, output), "
                "completed_seq = COALESCE(?, completed_seq), error = COALESCE(?, error) "
                "WHERE run_id = ? AND step_key = ?"
            ),
            "transition": (
                "INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, "
                "detail) VALUES (?, ?, ?, ?, ?, ?)"
            ),
            "insert_run": (
                "INSERT INTO sf_flow_runs (id, user_id, agent_id, flow_name, flow_version, status, inputs, "
                "started_at, updated_at, owner, definition, cancel_requested) "
                "VALUES (?, ?, ?, ?, ?, 'running', JSONPH, ?, ?, ?, JSONPH, FALSE)"
            ),
            "run_state": f"SELECT r.status FROM sf_flow_runs r WHERE r.id = ?{lock}",
            "finish_run": (
                "UPDATE sf_flow_runs SET status = ?, outputs = JSONPH, error = ?, outcome = ?, "
                "ended_at = ?, updated_at = ? WHERE id = ?"
            ),
        }
        done = {k: v.replace("?", ph).replace("JSONPH", json_ph) for k, v in sql.items()}
        # PostgreSQL: each journal write commits synchronously (one WAL flush per step): with
        # the runtime's default durability ("exit") LangGraph saves no checkpoint between
        # steps, so the journal alone says which steps completed, and a completion lost in a
        # server crash would run its step again. SQLite's WAL with synchronous=NORMAL commits
        # without an fsync: durable against a process crash, not a power loss.
        return cls(begin="BEGIN IMMEDIATE" if dialect == "sqlite" else "", **done)


@functools.cache
def _journal_sql(dialect: str) -> JournalSql:
    return JournalSql._build(dialect)


def insert_transitions(cur: Any, sql: JournalSql, rows: list[tuple[Any, ...]]) -> None:
    """The rows in one statement (one round trip on PostgreSQL)."""
    if len(rows) == 1:  # the usual case: executemany costs more for one row
        cur.execute(sql.transition, rows[0])
        return
    if sql.begin:  # SQLite: executemany costs no round trip
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
    after every :data:`CHECKPOINT_EVERY` commits a :class:`~soloflow_core.store.wal.WalCheckpointer`
    checkpoints instead: the bulk while steps go on committing, the tail holding the journal's
    lock briefly so the checkpoint completes and the WAL restarts. Other connections, in this
    process or others, keep SQLite's automatic checkpoints."""

    def __init__(self, db: Database) -> None:
        self.engine = engine = db.engine
        self.raw: Any = db.driver_connection()
        conn: Any = self.raw.driver_connection
        self.conn = conn
        path = engine.url.database
        self.background = (
            bool(path) and path != ":memory:" and not str(path).startswith("file::memory:")
        )
        if self.background:
            try:
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            except sqlite3.Error as exc:
                self.raw.close()
                raise StoreError(
                    f"flow-run store: cannot set up the journal's connection: {exc}"
                ) from exc
        self.commits = 0
        self.checkpoints = WalCheckpointer(db, tail_lock=_sqlite_lock(engine))

    def committed(self) -> None:
        self.commits += 1
        if self.background and not self.commits % CHECKPOINT_EVERY:
            self.checkpoints.request()

    def close(self) -> None:
        """Stop the checkpoint thread (it may need the journal's lock: call this without it),
        then give the connection back to the pool as it came."""
        self.checkpoints.close()
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


def driver_transaction(db: Database, sql: JournalSql, work: Callable[[Any], Any]) -> Any:
    """``work(cursor)`` in one write transaction on the driver's connection (``BEGIN
    IMMEDIATE`` on SQLite)."""
    if db.dialect == "sqlite":
        return _sqlite_transaction(db, sql, work)
    raw = db.driver_connection()
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
    except db.engine.dialect.dbapi.Error as exc:  # type: ignore[union-attr]
        raise StoreError(f"flow-run store write failed: {exc}") from exc
    finally:
        raw.close()


def _sqlite_transaction(db: Database, sql: JournalSql, work: Callable[[Any], Any]) -> Any:
    # Parallel steps of this process queue on a Python lock: SQLite's own busy handler would
    # make them sleep 1, 2, 5, 10 ... ms. Writes are serialised anyway, so they share one
    # connection, kept out of the pool until the store closes (no checkout per write).
    engine = db.engine
    with _sqlite_lock(engine):
        writer = _SQLITE_WRITERS.get(engine)
        if writer is None:
            writer = _SQLITE_WRITERS[engine] = _SqliteWriter(db)
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


def driver_statement(db: Database, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """One statement through the driver; its rows. PostgreSQL: in autocommit — its own
    transaction, one round trip instead of ``BEGIN``, the statement and ``COMMIT`` each
    waiting for the server. SQLite: a read (``?`` placeholders) on the driver connection."""
    raw = db.driver_connection()
    try:
        conn: Any = raw.driver_connection
        if db.dialect == "sqlite":  # reads only: sqlite3 opens no transaction for them
            cur = conn.cursor()
            try:
                cur.execute(statement, params)
                return cast("list[tuple[Any, ...]]", cur.fetchall())
            finally:
                cur.close()
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
                return cur.fetchall() if cur.description is not None else []
        finally:
            conn.autocommit = False
    except db.engine.dialect.dbapi.Error as exc:  # type: ignore[union-attr]
        raise StoreError(f"flow-run store write failed: {exc}") from exc
    finally:
        raw.close()


DURABLE_BEGIN = ("BEGIN", "SET LOCAL synchronous_commit TO ON")
"""The statements that open a :func:`durable_transaction` (send them in its first pipeline)."""


def durable_transaction(db: Database, work: Callable[[Any, Any], Any]) -> Any:
    """PostgreSQL: ``work(connection, cursor)`` on ``db``'s driver connection in autocommit
    mode — on the journal's pool (:meth:`~soloflow_core.store.database.Database.journal`):
    no pre-ping. ``work`` opens its transaction with :data:`DURABLE_BEGIN` (its commit then
    waits for its WAL flush, as the main pool's do) and ends it with ``COMMIT``, sending its
    statements in pipelines (``connection.pipeline()``) so that they wait for the server
    once, not once each. If ``work`` fails, its transaction is rolled back. Returns what
    ``work`` returns."""
    raw = db.driver_connection()
    try:
        conn: Any = raw.driver_connection
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                try:
                    return work(conn, cur)
                except BaseException:
                    conn.rollback()  # a pipeline stops at an error: end the transaction
                    raise
        finally:
            conn.autocommit = False
    except db.engine.dialect.dbapi.Error as exc:  # type: ignore[union-attr]
        raise StoreError(f"store write failed: {exc}") from exc
    finally:
        raw.close()


def durable_pipeline(db: Database, work: Callable[[Any], Callable[[], Any]]) -> Any:
    """PostgreSQL: ``work(cursor)`` in one :func:`durable_transaction` sent as one pipeline:
    ``BEGIN``, ``SET LOCAL synchronous_commit TO ON``, ``work``'s statements and ``COMMIT``
    wait for the server once. ``work`` reads no result: it returns a function that reads
    them once the pipeline has ended; what that returns is returned."""

    def run(conn: Any, cur: Any) -> Any:
        with conn.pipeline():  # work's cursor keeps its own results
            for statement in DURABLE_BEGIN:
                conn.execute(statement)
            results = work(cur)
            conn.execute("COMMIT")
        return results()

    return durable_transaction(db, run)
