"""Traces: the spans of a run (an agent run or a flow run), kept beside it and read back
exactly as they were written."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.models.names import check_namespace
from soloflow_core.store import schema as t
from soloflow_core.store.journal_io import durable_pipeline
from soloflow_core.store.json_values import flat_json_text, jsonable, storable_text
from soloflow_core.store.packed_spans import (
    PackedSpans,
    pack_descendants,
    packable,
    unpack_descendants,
)
from soloflow_core.store.writer import AnyRun, insert_returning, now, write_one_sqlite
from soloflow_core.tracing.spans import Span

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from soloflow_core.store.database import Database

log = logging.getLogger(__name__)

__all__ = ["NamespaceCost", "TraceRepository"]


@dataclass(frozen=True, slots=True)
class NamespaceCost:
    """What a namespace's captured agent runs cost."""

    total_usd: float
    """The sum over the priced runs."""
    priced_runs: int
    unpriced_runs: int
    """Runs with model calls and no cost: a model no price table knows (not counted as 0)."""


class TraceRepository:
    """Run traces (``store.traces``): the spans of captured runs and their cost."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._stamp: Callable[[datetime], str] | None = db.stamp

    def add_spans(self, run_id: str, spans: Sequence[Span], *, user_id: str, agent_id: str) -> int:
        """Keep ``spans`` as (more of) run ``run_id``'s trace, after those already kept; a span
        whose id is already kept for the run is left as it is. Returns how many were added."""
        if not spans:
            return 0
        check_namespace(user_id, agent_id)
        if self._stamp is not None:
            stamp = self._stamp
            with _driver_cursor(self.db) as (db, cur):
                cur.execute("BEGIN IMMEDIATE")
                try:
                    added = _insert_spans_sqlite(
                        cur, run_id, spans, user_id=user_id, agent_id=agent_id, stamp=stamp
                    )
                    cur.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.rollback()
                    raise
            return added
        if self.db.dialect == "postgresql":  # one round trip, no pre-ping; committed durably
            return int(
                durable_pipeline(
                    self.db.journal(),
                    lambda cur: _insert_spans_pg(
                        cur, run_id, spans, user_id=user_id, agent_id=agent_id
                    ),
                )
            )
        with self.db.write() as conn:
            return _insert_spans(conn, run_id, spans, user_id=user_id, agent_id=agent_id)

    def add_traced_run(self, run: AnyRun, spans: Sequence[Span] = ()) -> bool:
        """:meth:`~soloflow_core.store.Store.add_run` and :meth:`add_spans` in one transaction:
        the run with its trace. False if the run id was already stored in its namespace (its
        spans not kept yet are then added as :meth:`add_spans` does). A trace the database
        refuses is logged and left out; the run is stored all the same.

        A trace that is one root span and spans of its trace under it (a captured agent run's)
        is kept as one row, the root's, its other spans packed in it (``packed_spans``);
        :meth:`get_spans` reads them back the same."""
        ns = {"user_id": run.user_id, "agent_id": run.agent_id}
        packed = _packed(spans)
        if self._stamp is not None:
            stamp = self._stamp

            def trace_too(cur: Any) -> None:
                if packed is not None:  # one statement: SQLite takes all of it or none
                    try:
                        _insert_packed_sqlite(cur, run.run_id, packed, **ns, stamp=stamp)
                    except Exception:  # the driver's refusal, or a value it cannot bind
                        log.exception("storing the trace of run %s failed", run.run_id)
                    return
                cur.execute("SAVEPOINT sf_trace")
                try:
                    _insert_spans_sqlite(cur, run.run_id, spans, **ns, stamp=stamp, packed=packed)
                except Exception:  # the driver's refusal, or a value it cannot bind
                    cur.execute("ROLLBACK TO sf_trace")
                    log.exception("storing the trace of run %s failed", run.run_id)
                cur.execute("RELEASE sf_trace")

            raw = self.db.driver_connection()
            try:
                db: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
                fresh = write_one_sqlite(
                    db, run, now(), stamp=stamp, then=trace_too if spans else None
                )
            finally:
                raw.close()
        else:
            fresh = self._add_traced_run_returning(run, spans, packed=packed)
        if not fresh and spans:
            kept = {s.id for s in self.get_spans(run.run_id, **ns)}
            self.add_spans(run.run_id, [s for s in spans if s.id not in kept], **ns)
        return fresh

    def _add_traced_run_returning(
        self, run: AnyRun, spans: Sequence[Span], *, packed: tuple[Span, str] | None
    ) -> bool:
        c = t.task_runs.c
        with self.db.write() as conn:
            q = sa.select(c.id).where(
                c.user_id == run.user_id, c.agent_id == run.agent_id, c.run_id == run.run_id
            )
            if conn.execute(q).first() is not None:
                return False
            insert_returning(conn, [run], now())
            if spans:
                try:
                    with conn.begin_nested():
                        _insert_spans(
                            conn,
                            run.run_id,
                            spans,
                            user_id=run.user_id,
                            agent_id=run.agent_id,
                            packed=packed,
                        )
                except Exception:  # the database's refusal, or a value it cannot bind
                    log.exception("storing the trace of run %s failed", run.run_id)
        return True

    def get_spans(self, run_id: str, *, user_id: str, agent_id: str) -> list[Span]:
        """Run ``run_id``'s spans in the order they started; empty when it has no trace."""
        c = t.spans.c
        q = (
            sa.select(
                c.trace_id,
                c.span_id,
                c.parent_id,
                c.name,
                c.kind,
                c.start_at,
                c.duration_ms,
                c.status,
                c.error,
                c.attributes,
                c.descendants,
            )
            .where(c.user_id == user_id, c.agent_id == agent_id, c.run_id == run_id)
            .order_by(c.pos)
        )
        spans: list[Span] = []
        with self.db.read() as conn:
            rows = conn.execute(q).all()
        for r in rows:
            span = Span(
                trace_id=r.trace_id,
                id=r.span_id,
                parent=r.parent_id,
                name=r.name,
                kind=r.kind,
                start=r.start_at,
                duration_ms=r.duration_ms,
                status=r.status,
                error=r.error,
                attributes=dict(r.attributes or {}),
            )
            spans.append(span)
            spans.extend(unpack_descendants(span, r.descendants))
        return spans

    def namespace_cost(self, *, user_id: str, agent_id: str) -> NamespaceCost:
        """The cost of the namespace's task runs, rolled up (one query)."""
        c = t.task_runs.c
        unpriced = sa.and_(c.cost.is_(None), c.model_call_count > 0)
        q = sa.select(
            sa.func.coalesce(sa.func.sum(c.cost), 0.0),
            sa.func.count(c.cost),
            sa.func.count(sa.case((unpriced, 1))),
        ).where(c.user_id == user_id, c.agent_id == agent_id)
        with self.db.read() as conn:
            total, priced, missing = conn.execute(q).one()
        return NamespaceCost(
            total_usd=float(total), priced_runs=int(priced), unpriced_runs=int(missing)
        )


def _packed(spans: Sequence[Span]) -> tuple[Span, str] | None:
    """The root and its descendants' text when ``spans`` are kept as one row, else None."""
    if isinstance(spans, PackedSpans):  # a root alone is a row of its own, as in a list
        return (spans.root, spans.text()) if spans.records else None
    return (spans[0], pack_descendants(spans[0], spans[1:])) if packable(spans) else None


def _insert_spans(
    conn: Connection,
    run_id: str,
    spans: Sequence[Span],
    *,
    user_id: str,
    agent_id: str,
    packed: tuple[Span, str] | None = None,
) -> int:
    """Any database, in ``conn``'s transaction: the spans not kept yet, after those kept;
    ``packed`` (the root and its descendants' text) is written instead, as one row."""
    c = t.spans.c
    where = (c.user_id == user_id, c.agent_id == agent_id, c.run_id == run_id)
    rows_kept = conn.execute(sa.select(c.span_id, c.pos).where(*where)).all()
    kept = {r.span_id for r in rows_kept}
    pos = max((int(r.pos) for r in rows_kept), default=-1)
    rows = []
    for span in spans if packed is None else [packed[0]]:
        if span.id in kept:
            continue
        kept.add(span.id)
        pos += 1
        rows.append(
            {
                "user_id": user_id,
                "agent_id": agent_id,
                "run_id": run_id,
                "span_id": span.id,
                "pos": pos,
                "trace_id": span.trace_id,
                "parent_id": span.parent,
                "name": storable_text(span.name),
                "kind": span.kind,
                "start_at": span.start,
                "duration_ms": jsonable(span.duration_ms),
                "status": span.status,
                "error": None if span.error is None else storable_text(span.error),
                "attributes": jsonable(span.attributes),
                "descendants": None if packed is None else packed[1],
            }
        )
    if rows:
        conn.execute(sa.insert(t.spans), rows)
    return len(rows)


def _insert_spans_sqlite(
    cur: sqlite3.Cursor,
    run_id: str,
    spans: Sequence[Span],
    *,
    user_id: str,
    agent_id: str,
    stamp: Callable[[datetime], str],
    packed: tuple[Span, str] | None = None,
) -> int:
    """SQLite, in the cursor's transaction: :func:`_insert_spans` through the driver's
    ``executemany`` (SQLAlchemy's statement and per-row set-up cost several times the insert)."""
    descendants = None
    if packed is not None:
        spans, descendants = [packed[0]], packed[1]
    top = cur.execute(_SQLITE_MAX_POS, (user_id, agent_id, run_id)).fetchone()[0]
    pos = 0 if top is None else int(top) + 1
    db = cur.connection
    before = db.total_changes
    text = storable_text
    cur.executemany(
        _SQLITE_INSERT,
        [
            (
                user_id,
                agent_id,
                run_id,
                s.id,
                pos + i,
                s.trace_id,
                s.parent,
                text(s.name),
                s.kind,
                stamp(s.start),
                s.duration_ms,
                s.status,
                None if s.error is None else text(s.error),
                flat_json_text(s.attributes),
                descendants,
            )
            for i, s in enumerate(spans)
        ],
    )
    return int(db.total_changes - before)


def _insert_spans_pg(
    cur: Any, run_id: str, spans: Sequence[Span], *, user_id: str, agent_id: str
) -> Callable[[], int]:
    """PostgreSQL, in the cursor's pipelined transaction: :func:`_insert_spans` with no read
    first. Each row takes the place after the run's last kept row (read by its own statement,
    which sees the rows inserted before it); a span whose id is kept already is left as it is.
    Returns what reads the rows inserted, once the pipeline has ended."""
    text = storable_text
    cur.executemany(
        _PG_INSERT,
        [
            (
                user_id,
                agent_id,
                run_id,
                s.id,
                user_id,
                agent_id,
                run_id,
                s.trace_id,
                s.parent,
                text(s.name),
                s.kind,
                s.start if s.start.tzinfo is not None else s.start.replace(tzinfo=UTC),
                s.duration_ms,
                s.status,
                None if s.error is None else text(s.error),
                flat_json_text(s.attributes),
            )
            for s in spans
        ],
    )
    return lambda: max(int(cur.rowcount), 0)


def _insert_packed_sqlite(
    cur: sqlite3.Cursor,
    run_id: str,
    packed: tuple[Span, str],
    *,
    user_id: str,
    agent_id: str,
    stamp: Callable[[datetime], str],
) -> None:
    """SQLite, in the cursor's transaction: the root's row holding its packed descendants,
    after the run's spans already kept, in one statement (its position found in it)."""
    s, descendants = packed
    text = storable_text
    cur.execute(
        _SQLITE_INSERT_PACKED,
        (
            user_id,
            agent_id,
            run_id,
            s.id,
            s.trace_id,
            s.parent,
            text(s.name),
            s.kind,
            stamp(s.start),
            s.duration_ms,
            s.status,
            None if s.error is None else text(s.error),
            flat_json_text(s.attributes),
            descendants,
            user_id,
            agent_id,
            run_id,
        ),
    )


@contextmanager
def _driver_cursor(database: Database) -> Iterator[tuple[sqlite3.Connection, sqlite3.Cursor]]:
    raw = database.driver_connection()
    try:
        db: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
        cur = db.cursor()
        try:
            yield db, cur
        finally:
            cur.close()
    finally:
        raw.close()


_SQLITE_MAX_POS = "SELECT max(pos) FROM sf_spans WHERE user_id = ? AND agent_id = ? AND run_id = ?"
_SQLITE_INSERT = (
    "INSERT INTO sf_spans (user_id, agent_id, run_id, span_id, pos, trace_id, parent_id, name, kind, start_at, "
    "duration_ms, status, error, attributes, descendants) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
_PG_INSERT = (
    "INSERT INTO sf_spans (user_id, agent_id, run_id, span_id, pos, trace_id, parent_id, name, kind, start_at, "
    "duration_ms, status, error, attributes) SELECT %s, %s, %s, %s, (SELECT COALESCE(MAX(pos), -1) + 1 "
    "FROM sf_spans WHERE user_id = %s AND agent_id = %s AND run_id = %s), %s, %s, %s, %s, %s, %s, %s, %s, "
    "CAST(%s AS jsonb) ON CONFLICT DO NOTHING"
)
_SQLITE_INSERT_PACKED = (
    "INSERT INTO sf_spans (user_id, agent_id, run_id, span_id, trace_id, parent_id, name, kind, start_at, "
    "duration_ms, status, error, attributes, descendants, pos) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(max(pos) + 1, 0) FROM sf_spans "
    "WHERE user_id = ? AND agent_id = ? AND run_id = ? "
    "ON CONFLICT DO NOTHING"
)
