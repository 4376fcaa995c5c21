"""Copying the ledger's events and the registered flows into the memory tiers' items.

Nothing here runs when runs are written: :meth:`MemoryIndexer.index_new_events` copies the
runs written since its cursor, and is called before every search and prune. On SQLite writes
are serialised, so row ids commit in order and the cursor misses nothing. On PostgreSQL a run
may commit after a run with a higher id (two writers of one namespace); runs within
:data:`LATE_COMMIT_WINDOW` ids below the cursor that have no items yet are picked up too.
What the tables hold is told in :mod:`~soloflow_core.store.memory_items`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from soloflow_core.store import schema as t
from soloflow_core.store.fulltext import FullTextIndex, index_text, namespace_token, scan_window
from soloflow_core.store.json_values import storable_text

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


@dataclass(slots=True)
class NewItem:
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


def upsert(conn: Connection, table: sa.Table) -> Any:
    return (sqlite.insert if conn.dialect.name == "sqlite" else postgresql.insert)(table)


def namespace_of(user_id: str, agent_id: str, tier: str) -> str:
    return namespace_token(user_id, agent_id, tier)


class MemoryIndexer:
    """Keeps a namespace's items up to its runs (episodic) and flows (semantic)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def _window(self) -> int:
        return 0 if self.db.dialect == "sqlite" else LATE_COMMIT_WINDOW

    def _cursor(self, conn: Connection, user_id: str, agent_id: str, *, tier: str) -> int:
        """The namespace's cursor, locked until the transaction ends (PostgreSQL: the row;
        SQLite: the write transaction already holds the database)."""
        c = t.memory_cursors.c
        conn.execute(
            upsert(conn, t.memory_cursors)
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
                self.insert(conn, user_id, agent_id, tier=EPISODIC, items=self._events(conn, runs))
                self._advance(
                    conn, user_id, agent_id, tier=EPISODIC, pk=max(row[0] for row in runs)
                )
            done += len(runs)
            if len(runs) < RUNS_PER_TRANSACTION:
                return done

    def _events(self, conn: Connection, runs: Sequence[Any]) -> list[NewItem]:
        tc = t.tool_calls.c
        at_of = {pk: at for pk, _, _, _, at in runs}
        run_id_of = {pk: run_id for pk, run_id, _, _, _ in runs}
        out: list[NewItem] = []
        for pk, run_id, task, success, at in runs:
            task = task or ""
            out.append(
                NewItem(
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
                NewItem(
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

    def insert(
        self, conn: Connection, user_id: str, agent_id: str, *, tier: str, items: Sequence[NewItem]
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
            namespace_of(user_id, agent_id, tier),
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
        ns = namespace_of(user_id, agent_id, SEMANTIC)
        with self.db.write() as conn:
            floor = self._cursor(conn, user_id, agent_id, tier=SEMANTIC) - self._window
            changed = self._changed_flows(conn, user_id, agent_id, floor=floor)
            fresh: list[NewItem] = []
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
            self.insert(conn, user_id, agent_id, tier=SEMANTIC, items=fresh)
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


def _flow_item(key: str, row: Any) -> NewItem:
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
    return NewItem(
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
