"""Traces: the spans of a run (an agent run or a flow run), kept beside it and read back
exactly as they were written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.store import schema as t
from soloflow_core.store.writer import json_text
from soloflow_core.tracing.spans import Span

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["NamespaceCost", "TraceStore"]


@dataclass(frozen=True, slots=True)
class NamespaceCost:
    """What a namespace's captured agent runs cost."""

    total_usd: float
    """The sum over the priced runs."""
    priced_runs: int
    unpriced_runs: int
    """Runs with model calls and no cost: a model no price table knows (not counted as 0)."""


class TraceStore:
    """Trace methods of :class:`~soloflow_core.store.Store` (a mixin)."""

    engine: Engine
    _writer: Engine
    _stamp: Callable[[datetime], str] | None

    def add_spans(self, run_id: str, spans: Sequence[Span], *, user_id: str, agent_id: str) -> int:
        """Keep ``spans`` as (more of) run ``run_id``'s trace, after those already kept; a span
        whose id is already kept for the run is left as it is. Returns how many were added."""
        if not spans:
            return 0
        if self._stamp is not None:
            return self._add_spans_sqlite(
                run_id, spans, user_id=user_id, agent_id=agent_id, stamp=self._stamp
            )
        c = t.spans.c
        with self._writer.begin() as conn:
            where = (c.user_id == user_id, c.agent_id == agent_id, c.run_id == run_id)
            rows_kept = conn.execute(sa.select(c.span_id, c.pos).where(*where)).all()
            kept = {r.span_id for r in rows_kept}
            pos = max((int(r.pos) for r in rows_kept), default=-1)
            rows = []
            for span in spans:
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
                        "name": span.name,
                        "kind": span.kind,
                        "start_at": span.start,
                        "duration_ms": span.duration_ms,
                        "status": span.status,
                        "error": span.error,
                        "attributes": span.attributes,
                    }
                )
            if rows:
                conn.execute(sa.insert(t.spans), rows)
        return len(rows)

    def _add_spans_sqlite(
        self,
        run_id: str,
        spans: Sequence[Span],
        *,
        user_id: str,
        agent_id: str,
        stamp: Callable[[datetime], str],
    ) -> int:
        # The driver's connection and executemany, as the run's own write (``write_one_sqlite``):
        # SQLAlchemy's statement and per-row set-up costs several times the insert.
        raw = self.engine.raw_connection()
        try:
            db: Any = raw.driver_connection
            cur = db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    top = cur.execute(_SQLITE_MAX_POS, (user_id, agent_id, run_id)).fetchone()[0]
                    base = -1 if top is None else int(top)
                    before = db.total_changes
                    cur.executemany(
                        _SQLITE_INSERT,
                        [
                            (
                                user_id,
                                agent_id,
                                run_id,
                                s.id,
                                base + 1 + i,
                                s.trace_id,
                                s.parent,
                                s.name,
                                s.kind,
                                stamp(s.start),
                                s.duration_ms,
                                s.status,
                                s.error,
                                json_text(s.attributes),
                            )
                            for i, s in enumerate(spans)
                        ],
                    )
                    added = int(db.total_changes - before)
                    cur.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.rollback()
                    raise
            finally:
                cur.close()
        finally:
            raw.close()
        return added

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
            )
            .where(c.user_id == user_id, c.agent_id == agent_id, c.run_id == run_id)
            .order_by(c.pos)
        )
        with self.engine.connect() as conn:
            return [
                Span(
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
                for r in conn.execute(q)
            ]

    def namespace_cost(self, *, user_id: str, agent_id: str) -> NamespaceCost:
        """The cost of the namespace's task runs, rolled up (one query)."""
        c = t.task_runs.c
        unpriced = sa.and_(c.cost.is_(None), c.model_call_count > 0)
        q = sa.select(
            sa.func.coalesce(sa.func.sum(c.cost), 0.0),
            sa.func.count(c.cost),
            sa.func.count(sa.case((unpriced, 1))),
        ).where(c.user_id == user_id, c.agent_id == agent_id)
        with self.engine.connect() as conn:
            total, priced, missing = conn.execute(q).one()
        return NamespaceCost(
            total_usd=float(total), priced_runs=int(priced), unpriced_runs=int(missing)
        )


_SQLITE_MAX_POS = "SELECT max(pos) FROM sf_spans WHERE user_id = ? AND agent_id = ? AND run_id = ?"
_SQLITE_INSERT = (
    "INSERT INTO sf_spans (user_id, agent_id, run_id, span_id, pos, trace_id, parent_id, name, kind, start_at, "
    "duration_ms, status, error, attributes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
