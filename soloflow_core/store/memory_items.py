"""Memory tiers in the store: episodic and semantic items, their strength, full-text search.

Schema revision 0004:

- ``sf_memory_items``: one row per item of a (user, agent) namespace and tier. Episodic items
  are the ledger's events — each run's task (``kind="task"``, kept even when empty: it marks
  the run as indexed) and each tool call (``tool_call``, or ``tool_error`` when it failed: name,
  arguments and output as text) — plus what a caller records. Semantic items are the latest
  version of each registered flow (``kind="flow"``: name, description, tags, steps, tools,
  input templates). ``body`` is the full-text index's text (:data:`ITEM_SEARCH`, per namespace
  and tier).
- ``sf_memory_strength``: the forgetting curve's state of an item once it was used or archived
  (``base``, ``stability`` in days, ``last_used``, ``uses``, ``archived_at``). An item without
  a row has :data:`~soloflow_core.memory.decay.DEFAULT_BASE`,
  :data:`~soloflow_core.memory.decay.INITIAL_STABILITY_DAYS`, and its own time as last use.
  Archived items are flagged, never deleted.
- ``sf_memory_cursors``: the last run (episodic) or flow row (semantic) indexed per namespace.

Nothing here runs when runs are written: :class:`~soloflow_core.store.memory_index.MemoryIndexer`
copies what is new into the items, before every search and prune.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.memory.decay import (
    DEFAULT_BASE,
    INITIAL_STABILITY_DAYS,
    elapsed_days,
    forget_after,
    reinforce,
    retention,
)
from soloflow_core.models.names import check_namespace
from soloflow_core.store import schema as t
from soloflow_core.store.fulltext import (
    index_text,
    scan_window,
    search_terms,
)
from soloflow_core.store.json_values import storable_text
from soloflow_core.store.memory_index import (
    ITEM_SEARCH,
    SEMANTIC,
    MemoryIndexer,
    NewItem,
    namespace_of,
    upsert,
)
from soloflow_core.store.writer import now as utc_now

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from soloflow_core.store.database import Database

_TOP_FACTOR = 8


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """An item found by :meth:`MemoryRepository.search`, with its forgetting-curve state."""

    tier: str
    key: str
    kind: str
    text: str
    at: datetime
    data: dict[str, Any]
    score: float
    """Full-text rank, higher is better (0 for an empty query); comparable within one search."""
    retention: float
    base: float
    stability: float
    uses: int
    last_used: datetime
    archived_at: datetime | None = None


def _strength_join(i: Any) -> Any:
    s = t.memory_strength.c
    return t.memory_items.outerjoin(
        t.memory_strength,
        sa.and_(
            s.user_id == i.user_id,
            s.agent_id == i.agent_id,
            s.tier == i.tier,
            s.item_key == i.item_key,
        ),
    )


class MemoryRepository:
    """Reads and writes the memory tiers (``store.memory``). Every method takes the caller's
    namespace and never reads another's items."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.indexer = MemoryIndexer(db)

    def refresh(self, tier: str, *, user_id: str, agent_id: str) -> int:
        """Bring the tier's items up to the ledger (episodic) or the registered flows
        (semantic); see :class:`~soloflow_core.store.memory_index.MemoryIndexer`."""
        return self.indexer.refresh(tier, user_id=user_id, agent_id=agent_id)

    def add(
        self,
        tier: str,
        *,
        user_id: str,
        agent_id: str,
        kind: str,
        text: str,
        data: dict[str, Any],
        at: datetime,
    ) -> str:
        """Store one item a caller records (not from the ledger); returns its key."""
        check_namespace(user_id, agent_id)
        key = "rec:" + uuid.uuid4().hex
        text = storable_text(text)
        item = NewItem(
            key=key,
            kind=kind[:64],
            text=text,
            body=index_text([scan_window(text)]),
            at=at,
            data=data,
        )
        with self.db.write() as conn:
            self.indexer.insert(conn, user_id, agent_id, tier=tier, items=[item])
        return key

    # ------------------------------------------------------------------ reading

    def search(
        self,
        tier: str,
        query: str,
        *,
        user_id: str,
        agent_id: str,
        limit: int = 10,
        include_archived: bool = False,
        now: datetime | None = None,
    ) -> list[MemoryItem]:
        """The namespace's items of ``tier`` holding any term of ``query``, best first (the
        newest first for a query without terms); archived ones only with
        ``include_archived``. Never raises on odd text: empty, any language, 1 MB, query
        syntax (see :mod:`~soloflow_core.store.fulltext`)."""
        if limit <= 0:
            return []
        terms = search_terms(query) if isinstance(query, str) else []
        i, s = t.memory_items.c, t.memory_strength.c
        source = _strength_join(i)
        where = [i.user_id == user_id, i.agent_id == agent_id, i.tier == tier, i.body != ""]
        if not include_archived:
            where.append(s.archived_at.is_(None))
        columns = (
            i.item_key,
            i.kind,
            i.text,
            i.at,
            i.data,
            s.base,
            s.stability,
            s.uses,
            s.last_used,
            s.archived_at,
        )
        with self.db.read() as conn:
            if not terms:
                q = sa.select(*columns, sa.literal(0.0)).select_from(source).where(*where)
                q = q.order_by(i.at.desc(), i.id.desc()).limit(limit)
            else:
                ns = namespace_of(user_id, agent_id, tier)
                terms = ITEM_SEARCH.prune(conn, terms, namespace=ns)
                if not terms:
                    return []
                m = ITEM_SEARCH.match(
                    conn.dialect.name,
                    t.memory_items,
                    terms,
                    namespace=ns,
                    top=max(200, _TOP_FACTOR * limit),
                )
                if m.target is not None:
                    source = source.join(m.target, m.onclause)
                q = (
                    sa.select(*columns, m.rank.label("rank"))
                    .select_from(source)
                    .where(m.where, *where)
                    .order_by(sa.desc("rank"), i.at.desc(), i.id.desc())
                    .limit(limit)
                )
            rows = conn.execute(q).all()
            flow_used = self._flow_last_used(
                conn, user_id, agent_id, tier=tier, datas=[r[4] for r in rows]
            )
        now = now or utc_now()
        return [_item(tier, row, now, flow_used=flow_used) for row in rows]

    def _flow_last_used(
        self, conn: Connection, user_id: str, agent_id: str, *, tier: str, datas: Iterable[Any]
    ) -> dict[int, datetime]:
        """Semantic items: the last execution of their flow version (it counts as a use)."""
        pks = [
            d["flow_pk"]
            for d in datas
            if tier == SEMANTIC and isinstance(d, dict) and d.get("flow_pk")
        ]
        if not pks:
            return {}
        f = t.flows.c
        return {
            pk: used
            for pk, used in conn.execute(
                sa.select(f.id, f.last_used).where(
                    f.user_id == user_id,
                    f.agent_id == agent_id,
                    f.id.in_(pks),
                    f.last_used.is_not(None),
                )
            )
        }

    # ------------------------------------------------------------------ strength

    def reinforce(
        self,
        tier: str,
        keys: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        now: datetime | None = None,
    ) -> int:
        """Count one use of each of the namespace's items ``keys``: stability
        :func:`~soloflow_core.memory.decay.reinforce`-d, last use ``now``, uses + 1, and no
        longer archived. Unknown keys are ignored; returns how many items were reinforced."""
        keys = list(dict.fromkeys(k for k in keys if isinstance(k, str)))
        if not keys:
            return 0
        now = now or utc_now()
        i, s = t.memory_items.c, t.memory_strength.c
        with self.db.write() as conn:
            found = conn.execute(
                sa.select(i.item_key, s.base, s.stability, s.uses)
                .select_from(_strength_join(i))
                .where(
                    i.user_id == user_id,
                    i.agent_id == agent_id,
                    i.tier == tier,
                    i.item_key.in_(keys),
                )
            ).all()
            rows = [
                {
                    "user_id": user_id,
                    "agent_id": agent_id,
                    "tier": tier,
                    "item_key": key,
                    "base": DEFAULT_BASE if base is None else base,
                    "stability": reinforce(
                        INITIAL_STABILITY_DAYS if stability is None else stability
                    ),
                    "uses": (uses or 0) + 1,
                    "last_used": now,
                    "archived_at": None,
                }
                for key, base, stability, uses in found
            ]
            self._put_strength(conn, rows)
        return len(rows)

    def _put_strength(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        stmt = upsert(conn, t.memory_strength)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["user_id", "agent_id", "tier", "item_key"],
                set_={
                    c: stmt.excluded[c]
                    for c in ("base", "stability", "uses", "last_used", "archived_at")
                },
            ),
            rows,
        )

    def prune(
        self,
        tier: str,
        *,
        user_id: str,
        agent_id: str,
        threshold: float,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        """Archive the namespace's items of ``tier`` whose retention is below ``threshold``
        at ``now``; returns their keys (what would be archived, with ``dry_run``). Archived
        items keep their rows and text; :meth:`search` leaves them out."""
        now = now or utc_now()
        i, s = t.memory_items.c, t.memory_strength.c
        fresh_cutoff = now - timedelta(
            days=min(forget_after(DEFAULT_BASE, INITIAL_STABILITY_DAYS, threshold), 365_000)
        )
        ns = [i.user_id == user_id, i.agent_id == agent_id, i.tier == tier, i.body != ""]
        with self.db.write() as conn:
            # Never used: retention < threshold exactly when the item is older than the cutoff.
            never = conn.execute(
                sa.select(i.item_key, i.data, i.at)
                .select_from(_strength_join(i))
                .where(*ns, s.item_key.is_(None), i.at < fresh_cutoff)
            ).all()
            used = conn.execute(
                sa.select(i.item_key, i.data, i.at, s.base, s.stability, s.last_used)
                .select_from(_strength_join(i))
                .where(*ns, s.item_key.is_not(None), s.archived_at.is_(None))
            ).all()
            flow_used = self._flow_last_used(
                conn,
                user_id,
                agent_id,
                tier=tier,
                datas=[r[1] for r in never] + [r[1] for r in used],
            )
            new: list[dict[str, Any]] = []
            for key, data, at in never:
                used_at = _flow_use(data, flow_used)
                if used_at is None or used_at < fresh_cutoff:
                    new.append(
                        {
                            "user_id": user_id,
                            "agent_id": agent_id,
                            "tier": tier,
                            "item_key": key,
                            "base": DEFAULT_BASE,
                            "stability": INITIAL_STABILITY_DAYS,
                            "uses": 0,
                            "last_used": max(at, used_at or at),
                            "archived_at": now,
                        }
                    )
            old: list[str] = []
            for key, data, at, base, stability, last_used in used:
                last = max(x for x in (at, last_used, _flow_use(data, flow_used)) if x is not None)
                if retention(base, elapsed_days(last, now), stability) < threshold:
                    old.append(key)
            if not dry_run:
                if new:
                    conn.execute(sa.insert(t.memory_strength), new)
                for start in range(0, len(old), 500):
                    conn.execute(
                        sa.update(t.memory_strength)
                        .where(
                            s.user_id == user_id,
                            s.agent_id == agent_id,
                            s.tier == tier,
                            s.item_key.in_(old[start : start + 500]),
                        )
                        .values(archived_at=now)
                    )
        return sorted([r["item_key"] for r in new] + old)


def _flow_use(data: Any, flow_used: dict[int, datetime]) -> datetime | None:
    return flow_used.get(data.get("flow_pk")) if isinstance(data, dict) else None  # type: ignore[arg-type]


def _item(tier: str, row: Any, now: datetime, *, flow_used: dict[int, datetime]) -> MemoryItem:
    key, kind, text, at, data, base, stability, uses, last_used, archived_at, rank = row
    base = DEFAULT_BASE if base is None else float(base)
    stability = INITIAL_STABILITY_DAYS if stability is None else float(stability)
    last = max(x for x in (at, last_used, _flow_use(data, flow_used)) if x is not None)
    return MemoryItem(
        tier=tier,
        key=key,
        kind=kind,
        text=text,
        at=at,
        data=dict(data or {}),
        score=float(rank or 0.0),
        retention=retention(base, elapsed_days(last, now), stability),
        base=base,
        stability=stability,
        uses=int(uses or 0),
        last_used=last,
        archived_at=archived_at,
    )
