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

Nothing here runs when runs are written: :meth:`MemoryRepository.index_new_events` copies the
runs written since its cursor, and is called before every search and prune. On SQLite writes
are serialised, so row ids commit in order and the cursor misses nothing. On PostgreSQL a run
may commit after a run with a higher id (two writers of one namespace); runs within
:data:`LATE_COMMIT_WINDOW` ids below the cursor that have no items yet are picked up too.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from soloflow_core.memory.decay import (
    DEFAULT_BASE,
    INITIAL_STABILITY_DAYS,
    elapsed_days,
    forget_after,
    reinforce,
    retention,
)
from soloflow_core.store import schema as t
from soloflow_core.store.fulltext import (
    FullTextIndex,
    index_text,
    namespace_token,
    scan_window,
    search_terms,
)
from soloflow_core.store.writer import now as utc_now
from soloflow_core.store.writer import storable_text

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from soloflow_core.store.database import Database

EPISODIC, SEMANTIC = "episodic", "semantic"
TIERS = (EPISODIC, SEMANTIC)
ITEM_SEARCH = FullTextIndex("sf_memory_items", "body")
"""The full-text index of every item, per namespace and tier."""
DISPLAY_CHARS = 2000
"""An event's ``text`` (what a search shows) is cut to this many characters; its index
reads the whole of it (the first and last 32 KiB of a longer one)."""
RUNS_PER_TRANSACTION = 500
"""Runs indexed per write transaction: a first index of a large ledger never holds the
write lock for long."""
LATE_COMMIT_WINDOW = 10_000
"""PostgreSQL: how far below the cursor (in row ids) runs and flows committed late are
looked for. Two full ingest batches (5,000 runs each) in flight at once."""
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


@dataclass(slots=True)
class _NewItem:
    key: str
    kind: str
    text: str
    body: str
    at: datetime
    data: dict[str, Any]
    run_pk: int | None = None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _clip(text: str) -> str:
    text = storable_text(text)
    return text if len(text) <= DISPLAY_CHARS else text[: DISPLAY_CHARS - 1] + "…"


def flow_item_key(name: str) -> str:
    """The semantic item key of a flow (its name; a digest when the name is long)."""
    if len(name) <= 200:
        return f"flow:{name}"
    return "flow#" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _upsert(conn: Connection, table: sa.Table) -> Any:
    return (sqlite.insert if conn.dialect.name == "sqlite" else postgresql.insert)(table)


def _ns(user_id: str, agent_id: str, tier: str) -> str:
    return namespace_token(user_id, agent_id, tier)


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
    """Reads and writes the memory tiers of one :class:`~soloflow_core.store.Store`. Every
    method takes the caller's namespace and never reads another's items."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def _window(self) -> int:
        return 0 if self.db.dialect == "sqlite" else LATE_COMMIT_WINDOW

    # ------------------------------------------------------------------ indexing

    def _cursor(self, conn: Connection, user_id: str, agent_id: str, *, tier: str) -> int:
        """The namespace's cursor, locked until the transaction ends (PostgreSQL: the row;
        SQLite: the write transaction already holds the database)."""
        c = t.memory_cursors.c
        conn.execute(
            _upsert(conn, t.memory_cursors)
            .values(user_id=user_id, agent_id=agent_id, tier=tier, last_pk=0)
            .on_conflict_do_nothing()
        )
        q = sa.select(c.last_pk).where(c.user_id == user_id, c.agent_id == agent_id, c.tier == tier)
        if conn.dialect.name != "sqlite":
            q = q.with_for_update()
        return int(conn.execute(q).scalar_one())

    def _advance(
        self, conn: Connection, user_id: str, agent_id: str, *, tier: str, pk: int
    ) -> None:
        c = t.memory_cursors.c
        conn.execute(
            sa.update(t.memory_cursors)
            .where(c.user_id == user_id, c.agent_id == agent_id, c.tier == tier, c.last_pk < pk)
            .values(last_pk=pk)
        )

    def _unindexed_runs(self, user_id: str, agent_id: str, floor: int) -> Any:
        r, i = t.task_runs.c, t.memory_items.c
        return (
            sa.select(
                r.id,
                r.run_id,
                r.task,
                r.success,
                sa.func.coalesce(r.ended_at, r.started_at, r.created_at),
            )
            .where(
                r.user_id == user_id,
                r.agent_id == agent_id,
                r.id > floor,
                ~sa.exists().where(i.run_pk == r.id),
            )
            .order_by(r.id)
        )

    def _read_cursor(self, conn: Connection, user_id: str, agent_id: str, *, tier: str) -> int:
        c = t.memory_cursors.c
        return int(
            conn.execute(
                sa.select(c.last_pk).where(
                    c.user_id == user_id, c.agent_id == agent_id, c.tier == tier
                )
            ).scalar()
            or 0
        )

    def index_new_events(self, *, user_id: str, agent_id: str) -> int:
        """Copy the namespace's runs written since the last call into its episodic items
        (a few transactions of :data:`RUNS_PER_TRANSACTION` runs); returns how many runs.
        Cheap when there is nothing new: one read."""
        with self.db.read() as conn:
            floor = self._read_cursor(conn, user_id, agent_id, tier=EPISODIC) - self._window
            if (
                conn.execute(self._unindexed_runs(user_id, agent_id, floor).limit(1)).first()
                is None
            ):
                return 0
        done = 0
        while True:
            with self.db.write() as conn:
                floor = self._cursor(conn, user_id, agent_id, tier=EPISODIC) - self._window
                runs = conn.execute(
                    self._unindexed_runs(user_id, agent_id, floor).limit(RUNS_PER_TRANSACTION)
                ).all()
                if not runs:
                    return done
                self._insert(conn, user_id, agent_id, tier=EPISODIC, items=self._events(conn, runs))
                self._advance(
                    conn, user_id, agent_id, tier=EPISODIC, pk=max(row[0] for row in runs)
                )
            done += len(runs)
            if len(runs) < RUNS_PER_TRANSACTION:
                return done

    def _events(self, conn: Connection, runs: Sequence[Any]) -> list[_NewItem]:
        tc = t.tool_calls.c
        at_of = {pk: at for pk, _, _, _, at in runs}
        run_id_of = {pk: run_id for pk, run_id, _, _, _ in runs}
        out: list[_NewItem] = []
        for pk, run_id, task, success, at in runs:
            task = task or ""
            out.append(
                _NewItem(
                    key=f"r{pk}:task",
                    kind="task",
                    text=_clip(task),
                    body=index_text([scan_window(task)]),
                    at=at,
                    data={"run_id": run_id, "success": success},
                    run_pk=pk,
                )
            )
        calls = conn.execute(
            sa.select(tc.run_pk, tc.seq, tc.name, tc.args, tc.output, tc.error)
            .where(tc.run_pk.in_(list(at_of)))
            .order_by(tc.run_pk, tc.seq)
        )
        for pk, seq, name, args, output, error in calls:
            args_text, output_text = _as_text(args or {}), _as_text(output)
            text = f"{name} {args_text}" + (f" → {output_text}" if output_text else "")
            body = index_text(
                [name, scan_window(args_text), scan_window(output_text), "error" if error else ""]
            )
            out.append(
                _NewItem(
                    key=f"r{pk}:c{seq}",
                    kind="tool_error" if error else "tool_call",
                    text=_clip(text),
                    body=body,
                    at=at_of[pk],
                    run_pk=pk,
                    data={"run_id": run_id_of[pk], "seq": seq, "tool": name, "error": bool(error)},
                )
            )
        return out

    def _insert(
        self, conn: Connection, user_id: str, agent_id: str, *, tier: str, items: Sequence[_NewItem]
    ) -> None:
        if not items:
            return
        rows = [
            {
                "user_id": user_id,
                "agent_id": agent_id,
                "tier": tier,
                "item_key": x.key,
                "kind": x.kind,
                "run_pk": x.run_pk,
                "text": x.text,
                "body": x.body,
                "data": x.data,
                "at": x.at,
            }
            for x in items
        ]
        pks = (
            conn.execute(
                sa.insert(t.memory_items).returning(
                    t.memory_items.c.id, sort_by_parameter_order=True
                ),
                rows,
            )
            .scalars()
            .all()
        )
        _put_many(
            conn,
            _ns(user_id, agent_id, tier),
            [(int(pk), x.body) for pk, x in zip(pks, items, strict=True)],
        )

    def _changed_flows(
        self, conn: Connection, user_id: str, agent_id: str, *, floor: int
    ) -> list[tuple[str, Any, tuple[int, str] | None]]:
        """The namespace's latest flow versions above ``floor`` whose item is missing or
        older, as (item key, flow row, (item id, indexed body) or None)."""
        f, i = t.flows.c, t.memory_items.c
        flows = conn.execute(
            sa.select(
                f.id,
                f.name,
                f.version,
                f.definition,
                f.created_at,
                f.source,
                f.status,
                f.trigger_keywords,
            )
            .where(f.user_id == user_id, f.agent_id == agent_id, f.is_latest, f.id > floor)
            .order_by(f.id)
        ).all()
        if not flows:
            return []
        keys = {flow_item_key(row.name): row for row in flows}
        existing = {
            key: (pk, body, (data or {}).get("flow_pk", 0))
            for pk, key, body, data in conn.execute(
                sa.select(i.id, i.item_key, i.body, i.data).where(
                    i.user_id == user_id,
                    i.agent_id == agent_id,
                    i.tier == SEMANTIC,
                    i.item_key.in_(list(keys)),
                )
            )
        }
        out: list[tuple[str, Any, tuple[int, str] | None]] = []
        for key, row in keys.items():
            old = existing.get(key)
            if old is None or old[2] < row.id:
                out.append((key, row, None if old is None else (old[0], old[1])))
        return out

    def index_new_flows(self, *, user_id: str, agent_id: str) -> int:
        """Bring the namespace's semantic items up to its registered flows (the latest
        version of each replaces the previous one's item); returns how many flows changed.
        Cheap when nothing changed: one read."""
        with self.db.read() as conn:
            floor = self._read_cursor(conn, user_id, agent_id, tier=SEMANTIC) - self._window
            if not self._changed_flows(conn, user_id, agent_id, floor=floor):
                return 0
        i = t.memory_items.c
        ns = _ns(user_id, agent_id, SEMANTIC)
        with self.db.write() as conn:
            floor = self._cursor(conn, user_id, agent_id, tier=SEMANTIC) - self._window
            changed = self._changed_flows(conn, user_id, agent_id, floor=floor)
            fresh: list[_NewItem] = []
            for key, row, old in changed:
                item = _flow_item(key, row)
                if old is None:
                    fresh.append(item)
                    continue
                conn.execute(
                    sa.update(t.memory_items)
                    .where(i.id == old[0])
                    .values(
                        kind=item.kind, text=item.text, body=item.body, data=item.data, at=item.at
                    )
                )
                ITEM_SEARCH.remove(conn, [(old[0], ns, old[1])])
                ITEM_SEARCH.put(conn, old[0], item.body, namespace=ns)
            self._insert(conn, user_id, agent_id, tier=SEMANTIC, items=fresh)
            if changed:
                self._advance(
                    conn, user_id, agent_id, tier=SEMANTIC, pk=max(row.id for _, row, _ in changed)
                )
            return len(changed)

    def refresh(self, tier: str, *, user_id: str, agent_id: str) -> int:
        """:meth:`index_new_events` or :meth:`index_new_flows`, by tier."""
        if tier == EPISODIC:
            return self.index_new_events(user_id=user_id, agent_id=agent_id)
        return self.index_new_flows(user_id=user_id, agent_id=agent_id)

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
        key = "rec:" + uuid.uuid4().hex
        text = storable_text(text)
        item = _NewItem(
            key=key,
            kind=kind[:64],
            text=text,
            body=index_text([scan_window(text)]),
            at=at,
            data=data,
        )
        with self.db.write() as conn:
            self._insert(conn, user_id, agent_id, tier=tier, items=[item])
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
                ns = _ns(user_id, agent_id, tier)
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
        stmt = _upsert(conn, t.memory_strength)
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


def _put_many(conn: Connection, namespace: str, rows: Sequence[tuple[int, str]]) -> None:
    """:meth:`FullTextIndex.put` for many rows of one namespace in two statements (one per
    row costs ten times as much on a first index of a large ledger).

    Uses ``FullTextIndex._count``: replace by ``put_many`` once ``fulltext`` offers it."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            f"INSERT OR REPLACE INTO {ITEM_SEARCH.fts_table} (rowid, ns, body) VALUES (?, ?, ?)",
            [(pk, namespace, body) for pk, body in rows],
        )
    ITEM_SEARCH._count(conn, namespace, [body for _, body in rows], sign=+1)


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


def _flow_item(key: str, row: Any) -> _NewItem:
    d = row.definition if isinstance(row.definition, dict) else {}
    steps = [s for s in d.get("steps") or [] if isinstance(s, dict)]
    templates = [_as_text(v) for s in steps for v in (s.get("input_map") or {}).values()]
    parts = [
        row.name,
        d.get("description") or "",
        *map(str, d.get("tags") or []),
        *map(str, row.trigger_keywords or []),
        *(f"{s.get('id') or ''} {s.get('name') or ''} {s.get('skill_key') or ''}" for s in steps),
        *templates,
    ]
    chain = " → ".join(str(s.get("skill_key") or "") for s in steps)
    description = d.get("description") or ""
    text = (
        f"{row.name} (v{row.version})" + (f": {description}" if description else "") + f" — {chain}"
    )
    return _NewItem(
        key=key,
        kind="flow",
        text=_clip(text),
        body=index_text(scan_window(p) for p in parts),
        at=row.created_at,
        data={
            "flow": row.name,
            "version": row.version,
            "source": row.source,
            "status": row.status,
            "flow_pk": row.id,
            "skill_keys": [str(s.get("skill_key") or "") for s in steps],
        },
    )
