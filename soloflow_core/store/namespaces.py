"""Who holds data, and ids by prefix: what a person at a shell needs to find their things.

:meth:`NamespaceRepository.namespaces` lists the (user, agent) pairs that hold anything, with
counts; :meth:`NamespaceRepository.ids_with_prefix` finds the ids of one kind that start with
what was typed, inside one namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import sqlalchemy as sa

from soloflow_core.store import schema as t

if TYPE_CHECKING:
    from soloflow_core.store.database import Database

__all__ = ["IdKind", "NamespaceCounts", "NamespaceRepository"]

IdKind = Literal["run", "candidate", "flow_run", "flow"]
"""A task run id, a candidate id, a flow run id, or a flow name."""


@dataclass(frozen=True, slots=True)
class NamespaceCounts:
    """What one (user, agent) namespace holds."""

    user_id: str
    agent_id: str
    runs: int = 0
    candidates: int = 0
    flows: int = 0
    """Registered flows (latest versions)."""
    flow_runs: int = 0


def _id_column(kind: IdKind) -> tuple[sa.Table, sa.ColumnElement[str]]:
    return {
        "run": (t.task_runs, t.task_runs.c.run_id),
        "candidate": (t.candidates, t.candidates.c.id),
        "flow_run": (t.flow_runs, t.flow_runs.c.id),
        "flow": (t.flows, t.flows.c.name),
    }[kind]


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


class NamespaceRepository:
    """The namespaces holding rows, and ids by prefix (``store.namespaces``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def namespaces(self) -> list[NamespaceCounts]:
        """Every (user, agent) pair holding runs, candidates, flows or flow runs, sorted."""
        counts: dict[tuple[str, str], dict[str, int]] = {}
        sources: list[tuple[str, sa.Table, sa.ColumnElement[bool] | None]] = [
            ("runs", t.task_runs, None),
            ("candidates", t.candidates, None),
            ("flows", t.flows, t.flows.c.is_latest.is_(True)),
            ("flow_runs", t.flow_runs, None),
        ]
        with self.db.read() as conn:
            for field, table, where in sources:
                q = sa.select(table.c.user_id, table.c.agent_id, sa.func.count()).group_by(
                    table.c.user_id, table.c.agent_id
                )
                if where is not None:
                    q = q.where(where)
                for user, agent, n in conn.execute(q):
                    counts.setdefault((user, agent), {})[field] = int(n)
        return [
            NamespaceCounts(user_id=u, agent_id=a, **fields)
            for (u, a), fields in sorted(counts.items())
        ]

    def ids_with_prefix(
        self, kind: IdKind, prefix: str, *, user_id: str, agent_id: str, limit: int = 11
    ) -> list[str]:
        """The distinct ids of ``kind`` in the namespace that start with ``prefix`` (at most
        ``limit``, sorted); an id equal to ``prefix`` comes first."""
        table, column = _id_column(kind)
        ns = (table.c.user_id == user_id) & (table.c.agent_id == agent_id)
        with self.db.read() as conn:
            exact = conn.execute(sa.select(column).where(ns & (column == prefix)).limit(1)).first()
            q = (
                sa.select(column)
                .distinct()
                .where(ns & column.like(_like_prefix(prefix), escape="\\"))
                .order_by(column)
                .limit(limit)
            )
            found = [str(v) for (v,) in conn.execute(q)]
        if exact is not None:
            return [prefix, *(f for f in found if f != prefix)][:limit]
        return found
