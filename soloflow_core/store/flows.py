"""Registered flows in the store: their versions with procedural memory's record, the
lookup over their full-text index, and the evidence each flow's job is known by.

Each row of ``sf_flows`` is one version of a flow in a (user, agent) namespace; what its
columns mean and how the index is kept is told in :mod:`~soloflow_core.store.procedural`,
the evidence in :mod:`~soloflow_core.store.evidence`. Every method takes the caller's
namespace and never reads another's rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import sqlalchemy as sa

from soloflow_core.errors import NotFoundError
from soloflow_core.models import FlowDefinition
from soloflow_core.models.names import STORED
from soloflow_core.store import schema as t
from soloflow_core.store.evidence import EvidenceSource, insert_evidence, read_evidence
from soloflow_core.store.flow_lookup import FLOW_SEARCH, LookupCandidate, find_candidates
from soloflow_core.store.flow_records import change_flow_record_pg, change_flow_record_sqlite
from soloflow_core.store.fulltext import namespace_token
from soloflow_core.store.inverted_index import IndexCache
from soloflow_core.store.journal_io import driver_statement
from soloflow_core.store.procedural import (
    META_COLUMNS,
    FlowHit,
    FlowMeta,
    check_confidence,
    check_status,
    check_trigger_keywords,
    flow_meta,
    flow_search_text,
    insert_flow_version,
    reindex_flow_rows,
)
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from soloflow_core.store.database import Database

_LATEST_VERSION = {
    d: f"SELECT MAX(version) FROM sf_flows WHERE user_id = {ph} AND agent_id = {ph} AND name = {ph}"
    for d, ph in (("sqlite", "?"), ("postgresql", "%s"))
}
"""``Store.latest_flow_version`` through the driver: one round trip on PostgreSQL."""


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """A registered flow version."""

    flow: FlowDefinition
    source: str
    candidate_id: str | None
    created_at: datetime


T = TypeVar("T")
_DERIVED_KEPT = 256
"""Namespaces × derivations :meth:`FlowRepository.derived_from_flows` keeps in process."""


class FlowRepository:
    """Registered flows, their records and evidence (``store.flows``)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._indexes = IndexCache()
        self._derived: dict[tuple[Any, str, str], tuple[tuple[Any, ...], Any]] = {}
        self._derived_lock = threading.Lock()

    def register_flow(
        self,
        flow: FlowDefinition,
        *,
        user_id: str,
        agent_id: str,
        source: str,
        candidate_id: str | None = None,
    ) -> FlowDefinition:
        """Store ``flow`` as the next version of its name; returns it with that version.

        It becomes the latest version, indexed for search (see
        :func:`~soloflow_core.store.procedural.insert_flow_version`)."""
        with self.db.write() as conn:
            return insert_flow_version(
                conn,
                flow,
                user_id=user_id,
                agent_id=agent_id,
                source=source,
                candidate_id=candidate_id,
            )

    def latest_flow_version(self, name: str, *, user_id: str, agent_id: str) -> int | None:
        """The newest version number of flow ``name`` in the namespace (None: no such flow);
        one indexed read, for callers that cache definitions."""
        sql = _LATEST_VERSION.get(self.db.dialect)
        if sql is None:
            c = t.flows.c
            q = sa.select(sa.func.max(c.version)).where(
                c.user_id == user_id, c.agent_id == agent_id, c.name == name
            )
            with self.db.read() as conn:
                return conn.execute(q).scalar()
        rows = driver_statement(self.db.journal(), sql, (user_id, agent_id, name))
        return rows[0][0] if rows else None

    def get_flow(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> FlowRecord:
        c = t.flows.c
        q = sa.select(t.flows).where(c.user_id == user_id, c.agent_id == agent_id, c.name == name)
        q = q.where(c.version == version) if version is not None else q.order_by(c.version.desc())
        with self.db.read() as conn:
            row = conn.execute(q.limit(1)).mappings().first()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}; list flows with `soloflow flows list`"
            )
        return FlowRecord(
            flow=FlowDefinition.model_validate(row["definition"], context=STORED),
            source=row["source"],
            candidate_id=row["candidate_id"],
            created_at=row["created_at"],
        )

    def list_flows(self, *, user_id: str, agent_id: str) -> list[FlowRecord]:
        """The latest version of each flow in the namespace, by name."""
        c = t.flows.c
        latest = (
            sa.select(c.name, sa.func.max(c.version).label("v"))
            .where(c.user_id == user_id, c.agent_id == agent_id)
            .group_by(c.name)
            .subquery()
        )
        q = (
            sa.select(t.flows)
            .join(latest, sa.and_(c.name == latest.c.name, c.version == latest.c.v))
            .where(c.user_id == user_id, c.agent_id == agent_id)
            .order_by(c.name)
        )
        with self.db.read() as conn:
            return [
                FlowRecord(
                    flow=FlowDefinition.model_validate(r["definition"], context=STORED),
                    source=r["source"],
                    candidate_id=r["candidate_id"],
                    created_at=r["created_at"],
                )
                for r in conn.execute(q).mappings()
            ]

    def derived_from_flows(
        self, derive: Callable[[list[FlowRecord]], T], *, user_id: str, agent_id: str
    ) -> T:
        """``derive(list_flows(...))``, kept in process per namespace and ``derive``, and made
        again only when the namespace's flows change: their count, newest row and newest
        creation time are read on each call (one indexed query; a flow's definition is never
        changed in place, a new version is a new row). For what every flow of a namespace
        says, asked often and changing rarely (the kinds of value routing sets aside)."""
        c = t.flows.c
        mark_q = sa.select(sa.func.count(), sa.func.max(c.id), sa.func.max(c.created_at)).where(
            c.user_id == user_id, c.agent_id == agent_id
        )
        with self.db.read() as conn:
            mark = tuple(conn.execute(mark_q).one())
        key = (derive, user_id, agent_id)
        with self._derived_lock:
            held = self._derived.get(key)
        if held is not None and held[0] == mark:
            return cast("T", held[1])
        value = derive(self.list_flows(user_id=user_id, agent_id=agent_id))
        with self._derived_lock:
            self._derived.pop(key, None)
            self._derived[key] = (mark, value)
            while len(self._derived) > _DERIVED_KEPT:  # the least recently made go first
                del self._derived[next(iter(self._derived))]
        return value

    def add_flow_version(
        self,
        flow: FlowDefinition,
        *,
        user_id: str,
        agent_id: str,
        source: str,
        candidate_id: str | None = None,
        confidence: float | None = None,
        trigger_keywords: Sequence[str] | None = None,
    ) -> FlowDefinition:
        """``register_flow`` with the procedural-memory fields given (see
        :func:`insert_flow_version`). No validation of the flow itself: callers validate."""
        with self.db.write() as conn:
            return insert_flow_version(
                conn,
                flow,
                user_id=user_id,
                agent_id=agent_id,
                source=source,
                candidate_id=candidate_id,
                confidence=confidence,
                trigger_keywords=trigger_keywords,
            )

    def get_flow_meta(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> FlowMeta:
        """The record of the flow's ``version`` (default: the latest).

        Raises:
            NotFoundError: no such flow (version) in the namespace.
        """
        c = t.flows.c
        q = sa.select(*META_COLUMNS).where(
            c.user_id == user_id, c.agent_id == agent_id, c.name == name
        )
        q = q.where(c.version == version) if version is not None else q.where(c.is_latest)
        with self.db.read() as conn:
            row = conn.execute(q.limit(1)).first()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}; list flows with `soloflow flows list`"
            )
        return flow_meta(row)

    def get_flow_learning(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> dict[str, Any] | None:
        """The ``learning`` JSON of the flow's ``version`` (default: the latest): the outcome
        rules' state (prior, streaks) written by :meth:`update_flow_meta`; None when unset.

        Raises:
            NotFoundError: no such flow (version) in the namespace.
        """
        c = t.flows.c
        q = sa.select(c.learning).where(
            c.user_id == user_id, c.agent_id == agent_id, c.name == name
        )
        q = q.where(c.version == version) if version is not None else q.where(c.is_latest)
        with self.db.read() as conn:
            row = conn.execute(q.limit(1)).first()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}; list flows with `soloflow flows list`"
            )
        return row[0] if isinstance(row[0], dict) else None

    def list_flow_meta(
        self,
        *,
        user_id: str,
        agent_id: str,
        include_retired: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[FlowMeta]:
        """The latest version of each flow in the namespace, by name (``limit`` of them from
        ``offset`` when given)."""
        c = t.flows.c
        q = sa.select(*META_COLUMNS).where(
            c.user_id == user_id, c.agent_id == agent_id, c.is_latest
        )
        if not include_retired:
            q = q.where(c.status != "retired")
        q = q.order_by(c.name, c.version).limit(limit).offset(offset or None)
        with self.db.read() as conn:
            return [flow_meta(r) for r in conn.execute(q)]

    def list_flow_versions(self, name: str, *, user_id: str, agent_id: str) -> list[FlowMeta]:
        """Every stored version of the flow, newest first.

        Raises:
            NotFoundError: no flow of that name in the namespace.
        """
        c = t.flows.c
        q = (
            sa.select(*META_COLUMNS)
            .where(c.user_id == user_id, c.agent_id == agent_id, c.name == name)
            .order_by(c.version.desc())
        )
        with self.db.read() as conn:
            rows = [flow_meta(r) for r in conn.execute(q)]
        if not rows:
            raise NotFoundError(
                f"no flow {name!r} for user {user_id!r}, agent {agent_id!r}; list flows with "
                "`soloflow flows list`"
            )
        return rows

    def search_flows(
        self,
        terms: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        min_confidence: float = 0.0,
        limit: int = 50,
    ) -> list[FlowHit]:
        """The namespace's latest, non-retired flow versions whose index holds any of ``terms``
        (from :func:`~soloflow_core.store.fulltext.search_terms`; the ones most of the
        namespace's flows hold are left out, see :meth:`FullTextIndex.prune`) and whose
        confidence is at least ``min_confidence``; best text rank first, at most ``limit``."""
        if not terms or limit <= 0:
            return []
        c = t.flows.c
        ns = namespace_token(user_id, agent_id)
        with self.db.read() as conn:
            terms = FLOW_SEARCH.prune(conn, terms, namespace=ns)
            if not terms:
                return []
            m = FLOW_SEARCH.match(conn.dialect.name, t.flows, terms, namespace=ns, top=4 * limit)
            source = t.flows if m.target is None else t.flows.join(m.target, m.onclause)
            q = (
                sa.select(*META_COLUMNS, c.search_text, m.rank.label("rank"))
                .select_from(source)
                .where(
                    m.where,
                    c.user_id == user_id,
                    c.agent_id == agent_id,
                    c.is_latest,
                    c.status != "retired",
                    c.confidence >= min_confidence,
                )
                .order_by(sa.desc("rank"), c.name)
                .limit(limit)
            )
            return [
                FlowHit(
                    meta=flow_meta(row),
                    rank=float(row[-1] or 0.0),
                    terms=frozenset((row[-2] or "").split()),
                )
                for row in conn.execute(q)
            ]

    def find_flow_candidates(
        self,
        terms: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        min_confidence: float = 0.0,
        limit: int = 50,
    ) -> list[LookupCandidate]:
        """The namespace's latest, non-retired flow versions whose index holds any of ``terms``
        (from :func:`~soloflow_core.store.fulltext.search_terms`; every term counts) and whose
        confidence is at least ``min_confidence``: the ``limit`` best by text rank (see
        :attr:`~soloflow_core.store.flow_lookup.LookupCandidate.rank`; ties by name), best first.
        One statement per lookup.

        The namespace's index is kept in process (an :class:`InvertedIndex` in an
        :class:`IndexCache`) and ranked there; the statement reads the best flows' confidence,
        status and latest flag by id, and the namespace's change counter. When another writer
        (this process or another) changed the namespace's index since it was read, the index
        is read again and the lookup runs again. Confidence and status changes need no
        invalidation: they are read each time.
        """
        return find_candidates(
            self.db.journal(),
            self.flow_index_cache(),
            terms,
            user_id=user_id,
            agent_id=agent_id,
            min_confidence=min_confidence,
            limit=limit,
        )

    def flow_index_cache(self) -> IndexCache:
        """This store's lookup indexes (see :meth:`find_flow_candidates`)."""
        return self._indexes

    def record_flow_execution(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        success: bool,
        version: int | None = None,
        at: datetime | None = None,
    ) -> FlowMeta:
        """Count one execution of the flow's ``version`` (default: the latest): ``total_executions``
        + 1, ``success_count`` + 1 when ``success``, ``last_used`` = ``at`` (default: now).
        Confidence and status are the outcome rules' to change (:meth:`update_flow_meta`)."""
        c = t.flows.c
        where = [c.user_id == user_id, c.agent_id == agent_id, c.name == name]
        where.append(c.version == version if version is not None else c.is_latest)
        with self.db.write() as conn:
            done = conn.execute(
                sa.update(t.flows)
                .where(*where)
                .values(
                    total_executions=c.total_executions + 1,
                    success_count=c.success_count + (1 if success else 0),
                    last_used=at or now(),
                )
            ).rowcount
        if not done:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}"
            )
        return self.get_flow_meta(name, user_id=user_id, agent_id=agent_id, version=version)

    def update_flow_meta(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        version: int | None = None,
        confidence: float | None = None,
        status: str | None = None,
        trigger_keywords: Sequence[str] | None = None,
        learning: dict[str, Any] | None = None,
    ) -> FlowMeta:
        """Set the given fields of the flow's ``version`` (default: the latest); new trigger
        keywords are re-indexed at once.

        Raises:
            FlowValidationError: confidence outside [0, 1], an unknown status, bad keywords.
            NotFoundError: no such flow (version) in the namespace.
        """
        values: dict[str, Any] = {}
        if confidence is not None:
            check_confidence(confidence)
            values["confidence"] = float(confidence)
        if status is not None:
            check_status(status)
            values["status"] = status
        if learning is not None:
            values["learning"] = learning
        keywords = (
            None if trigger_keywords is None else check_trigger_keywords(list(trigger_keywords))
        )
        c = t.flows.c
        where = [c.user_id == user_id, c.agent_id == agent_id, c.name == name]
        where.append(c.version == version if version is not None else c.is_latest)
        with self.db.write() as conn:
            row = conn.execute(
                sa.select(c.id, c.definition, c.is_latest, c.search_text).where(*where)
            ).first()
            if row is None:
                raise NotFoundError(
                    f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                    f"{user_id!r}, agent {agent_id!r}"
                )
            if keywords is not None:
                from soloflow_core.models import FlowDefinition

                flow = FlowDefinition.model_validate(row.definition, context=STORED)
                values["trigger_keywords"] = keywords
                values["search_text"] = flow_search_text(flow, keywords)
            if values:
                conn.execute(sa.update(t.flows).where(c.id == row.id).values(**values))
            if keywords is not None and row.is_latest:
                ns = namespace_token(user_id, agent_id)
                FLOW_SEARCH.remove(conn, [(row.id, ns, row.search_text or "")])
                FLOW_SEARCH.put(conn, row.id, values["search_text"], namespace=ns)
        return self.get_flow_meta(name, user_id=user_id, agent_id=agent_id, version=version)

    def change_flow_record(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        change: Callable[[FlowMeta, dict[str, Any] | None], dict[str, Any]],
    ) -> FlowMeta:
        """Read the latest version's record and ``learning`` state, and write the columns
        ``change(meta, learning)`` returns (``success_count``, ``total_executions``,
        ``confidence``, ``status``, ``learning``, ``last_used``), in one transaction with the
        row locked (``BEGIN IMMEDIATE`` on SQLite, ``FOR UPDATE`` on PostgreSQL): concurrent
        outcomes of one flow, from any process, are never lost. Returns the record written
        (the locked row with ``change``'s columns, not read again).

        Raises:
            NotFoundError: no such flow in the namespace.
            FlowValidationError: ``change`` gave a confidence or status out of range.
        """
        if self.db.dialect == "postgresql":  # two round trips instead of five
            return change_flow_record_pg(
                self.db.journal(), name, user_id=user_id, agent_id=agent_id, change=change
            )
        return change_flow_record_sqlite(
            self.db, name, user_id=user_id, agent_id=agent_id, change=change
        )

    def reindex_flows(self) -> int:
        """Recompute every flow version's ``search_text`` from its definition and keywords,
        and rebuild the full-text index (every namespace: an operator's repair). Returns
        how many latest versions are indexed."""
        with self.db.write() as conn:
            return reindex_flow_rows(conn)

    def delete_flow(self, name: str, *, user_id: str, agent_id: str) -> int:
        """Delete every version of the flow ``name`` and its evidence (the flow runs stay, as
        history). Returns how many versions were deleted; 0 when there is none."""
        c, e = t.flows.c, t.flow_evidence.c
        with self.db.write() as conn:
            rows = [
                (pk, namespace_token(user_id, agent_id), text or "")
                for pk, text, latest in conn.execute(
                    sa.select(c.id, c.search_text, c.is_latest).where(
                        c.user_id == user_id, c.agent_id == agent_id, c.name == name
                    )
                )
                if latest
            ]
            FLOW_SEARCH.remove(conn, rows)
            deleted = conn.execute(
                sa.delete(t.flows).where(
                    c.user_id == user_id, c.agent_id == agent_id, c.name == name
                )
            ).rowcount
            conn.execute(
                sa.delete(t.flow_evidence).where(
                    e.user_id == user_id, e.agent_id == agent_id, e.flow_name == name
                )
            )
        return int(deleted or 0)

    def add_flow_evidence(
        self,
        name: str,
        texts: Iterable[tuple[str, str]],
        *,
        source: EvidenceSource,
        user_id: str,
        agent_id: str,
    ) -> int:
        """Add ``(run_id, task)`` pairs to the evidence of flow ``name`` (see the module
        docstring); returns how many were new."""
        with self.db.write() as conn:
            return insert_evidence(
                conn, name, texts, source=source, user_id=user_id, agent_id=agent_id
            )

    def flow_evidence(
        self, names: Sequence[str], *, user_id: str, agent_id: str
    ) -> dict[str, list[str]]:
        """Flow name → its evidence's task texts, newest first."""
        found = self.flow_evidence_sources(names, user_id=user_id, agent_id=agent_id)
        return {name: [task for task, _ in pairs] for name, pairs in found.items()}

    def flow_evidence_sources(
        self, names: Sequence[str], *, user_id: str, agent_id: str
    ) -> dict[str, list[tuple[str, str]]]:
        """Flow name → its evidence's ``(task text, source)`` pairs, newest first (sources:
        :data:`~soloflow_core.store.evidence.EvidenceSource`)."""
        with self.db.read() as conn:
            return read_evidence(conn, names, user_id=user_id, agent_id=agent_id)
