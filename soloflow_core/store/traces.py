"""Traces: the spans of a run (an agent run or a flow run), kept beside it and read back
exactly as they were written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

from soloflow_core.store import schema as t
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

    def add_spans(self, run_id: str, spans: Sequence[Span], *, user_id: str, agent_id: str) -> int:
        """Keep ``spans`` as (more of) run ``run_id``'s trace, after those already kept; a span
        whose id is already kept for the run is left as it is. Returns how many were added."""
        if not spans:
            return 0
        c = t.spans.c
        with self._writer.begin() as conn:
            where = (c.user_id == user_id, c.agent_id == agent_id, c.run_id == run_id)
            kept = set(conn.execute(sa.select(c.span_id).where(*where)).scalars())
            pos = conn.execute(sa.select(sa.func.max(c.pos)).where(*where)).scalar()
            pos = -1 if pos is None else int(pos)
            rows = []
            for span in spans:
                if span.id in kept:
                    continue
                kept.add(span.id)
                pos += 1
                rows.append({"user_id": user_id, "agent_id": agent_id, "run_id": run_id, "span_id": span.id,
                             "pos": pos, "trace_id": span.trace_id, "parent_id": span.parent, "name": span.name,
                             "kind": span.kind, "start_at": span.start, "duration_ms": span.duration_ms,
                             "status": span.status, "error": span.error, "attributes": span.attributes})  # fmt: skip
            if rows:
                conn.execute(sa.insert(t.spans), rows)
        return len(rows)

    def get_spans(self, run_id: str, *, user_id: str, agent_id: str) -> list[Span]:
        """Run ``run_id``'s spans in the order they started; empty when it has no trace."""
        c = t.spans.c
        q = (sa.select(c.trace_id, c.span_id, c.parent_id, c.name, c.kind, c.start_at, c.duration_ms, c.status,
                       c.error, c.attributes)
             .where(c.user_id == user_id, c.agent_id == agent_id, c.run_id == run_id).order_by(c.pos))  # fmt: skip
        with self.engine.connect() as conn:
            return [Span(trace_id=r.trace_id, id=r.span_id, parent=r.parent_id, name=r.name, kind=r.kind,
                         start=r.start_at, duration_ms=r.duration_ms, status=r.status, error=r.error,
                         attributes=dict(r.attributes or {})) for r in conn.execute(q)]  # fmt: skip

    def namespace_cost(self, *, user_id: str, agent_id: str) -> NamespaceCost:
        """The cost of the namespace's task runs, rolled up (one query)."""
        c = t.task_runs.c
        unpriced = sa.and_(c.cost.is_(None), c.model_call_count > 0)
        q = sa.select(sa.func.coalesce(sa.func.sum(c.cost), 0.0), sa.func.count(c.cost),
                      sa.func.count(sa.case((unpriced, 1)))).where(c.user_id == user_id, c.agent_id == agent_id)
        with self.engine.connect() as conn:
            total, priced, missing = conn.execute(q).one()
        return NamespaceCost(total_usd=float(total), priced_runs=int(priced), unpriced_runs=int(missing))

