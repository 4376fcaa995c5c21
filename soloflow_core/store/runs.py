"""Task runs in the store: writing them (each with all its calls or not at all) and reading
them back whole, as listings, or as the detector's tool-name sequences and evidence.

Every method takes the caller's namespace (``user_id``, ``agent_id``) and never returns
another namespace's rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.errors import NotFoundError
from soloflow_core.models import TaskRun
from soloflow_core.models.names import STORED
from soloflow_core.store import schema as t
from soloflow_core.store.columns import (
    EvidenceRun,
    ToolNameColumns,
    read_evidence,
    read_tool_names,
)
from soloflow_core.store.writer import (
    AnyRun,
    insert_returning,
    insert_sqlite,
    now,
    write_one_sqlite,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from soloflow_core.store.database import Database

_BATCH = 5000
"""Runs per write transaction: large batches amortise the per-statement cost."""
_IN_CHUNK = 500
"""Bound parameters per ``IN (...)`` list: well under every database's limit."""


def _json_text(value: str | float | None) -> Any:
    """A JSON column's text as SQLite returns it, decoded as SQLAlchemy would (the empty
    object and null, most calls' ``meta``, without the parser). A bare number comes back
    as a number already: the column's numeric affinity converted the text when stored."""
    if value is None or value == "null":
        return None
    if not isinstance(value, str):
        return value
    return {} if value == "{}" else json.loads(value)


def _tool_calls_of(conn: Connection, pks: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The tool calls of the runs ``pks``, in order, as :class:`ToolCall` fields (their run
    validates them all in one call: a model built per call costs twice as much).

    On SQLite the JSON columns are read as text and decoded here: SQLAlchemy's per-value
    result processing costs as much as the decoding (evidence for the detector is
    thousands of calls). PostgreSQL's driver decodes JSONB itself.
    """
    tc = t.tool_calls.c
    raw = conn.dialect.name == "sqlite"
    args, output, meta = (
        sa.type_coerce(col, sa.Text) if raw else col for col in (tc.args, tc.output, tc.meta)
    )
    decode = _json_text if raw else _same
    q = sa.select(tc.run_pk, tc.name, args, output, tc.error, tc.duration_ms, tc.tool_call_id, meta)
    calls: dict[int, list[dict[str, Any]]] = {}
    for pk, name, a, o, error, duration, call_id, m in conn.execute(
        q.where(tc.run_pk.in_(pks)).order_by(tc.run_pk, tc.seq)
    ):
        calls.setdefault(pk, []).append(
            {
                "name": name,
                "args": decode(a) or {},
                "output": decode(o),
                "error": error,
                "duration_ms": duration,
                "tool_call_id": call_id,
                "meta": decode(m) or {},
            }
        )
    return calls


def _model_calls_of(conn: Connection, pks: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The model calls of the runs ``pks``, in order, as :class:`ModelCall` fields."""
    mc = t.model_calls.c
    q = sa.select(
        mc.run_pk,
        mc.model,
        mc.input_tokens,
        mc.output_tokens,
        mc.total_tokens,
        mc.duration_ms,
        mc.tool_calls_requested,
    )
    calls: dict[int, list[dict[str, Any]]] = {}
    for pk, model, tin, tout, total, duration, requested in conn.execute(
        q.where(mc.run_pk.in_(pks)).order_by(mc.run_pk, mc.seq)
    ):
        calls.setdefault(pk, []).append(
            {
                "model": model,
                "input_tokens": tin,
                "output_tokens": tout,
                "total_tokens": total,
                "duration_ms": duration,
                "tool_calls_requested": requested,
            }
        )
    return calls


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A task run without its calls, for listings."""

    run_id: str
    task: str | None
    success: bool | None
    tool_count: int
    model_call_count: int
    tokens: int | None
    cost: float | None
    classification: str | None
    created_at: datetime
    routed_flow: str | None = None
    """The flow that answered the request in the agent's place, with no model call (the
    ``flow`` of the run's ``meta["routed"]``); None when the agent answered it."""


@dataclass(frozen=True, slots=True)
class RunSequence:
    """What the detector reads of a run: its tool names in order and its outcome."""

    run_id: str
    names: tuple[str, ...]
    errors: tuple[bool, ...]
    success: bool | None
    cost: float | None
    tokens: int | None


class RunRepository:
    """Task runs and their calls (``store.runs``).

    Example:
        >>> store.runs.add_runs([TaskRun(run_id="r1")])
        1
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def add_runs(self, runs: Iterable[AnyRun]) -> int:
        """Store runs, each with all its calls or not at all; skip run ids already stored.

        Runs are written in batches, one transaction per batch. A run is a :class:`TaskRun`,
        or a :class:`~soloflow_core.store.writer.RunRow` holding the same fields already
        checked (what ingest writes).

        Returns:
            how many runs were written.
        """
        written = 0
        batch: list[AnyRun] = []
        for run in runs:
            batch.append(run)
            if len(batch) >= _BATCH:
                written += self._write_batch(batch)
                batch = []
        if batch:
            written += self._write_batch(batch)
        return written

    def add_run(self, run: AnyRun) -> bool:
        """Store one run in one transaction; False if its run id was already stored in its
        namespace.

        On SQLite this is one ``INSERT ... ON CONFLICT DO NOTHING`` and the calls' inserts
        (no query first): what an agent's capture pays when its run ends. Committed is
        durable against a crash of the process (the WAL is written before ``COMMIT``
        returns); see :func:`~soloflow_core.store.engine.create_store_engine` for power loss.
        """
        if self.db.stamp is None:
            return self._write_batch([run]) == 1
        raw = self.db.driver_connection()  # pooled: one per thread
        try:
            driver: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
            return write_one_sqlite(driver, run, now(), stamp=self.db.stamp)
        finally:
            raw.close()

    def _existing_run_ids(
        self, conn: Connection, runs: Sequence[AnyRun]
    ) -> set[tuple[str, str, str]]:
        found: set[tuple[str, str, str]] = set()
        by_ns: dict[tuple[str, str], list[str]] = {}
        for r in runs:
            by_ns.setdefault((r.user_id, r.agent_id), []).append(r.run_id)
        for (user, agent), ids in by_ns.items():
            for start in range(0, len(ids), _IN_CHUNK):
                q = sa.select(t.task_runs.c.run_id).where(
                    t.task_runs.c.user_id == user,
                    t.task_runs.c.agent_id == agent,
                    t.task_runs.c.run_id.in_(ids[start : start + _IN_CHUNK]),
                )
                found.update((user, agent, rid) for rid in conn.execute(q).scalars())
        return found

    def _write_batch(self, runs: Sequence[AnyRun]) -> int:
        created = now()
        with self.db.write() as conn:
            existing = self._existing_run_ids(conn, runs)
            fresh: list[AnyRun] = []
            seen: set[tuple[str, str, str]] = set()
            for r in runs:
                key = (r.user_id, r.agent_id, r.run_id)
                if key in existing or key in seen:
                    continue
                seen.add(key)
                fresh.append(r)
            if not fresh:
                return 0
            if conn.dialect.name == "sqlite":
                insert_sqlite(conn, fresh, created)
            else:
                insert_returning(conn, fresh, created)
            return len(fresh)

    def count_runs(self, *, user_id: str, agent_id: str, success: bool | None = None) -> int:
        """The namespace's runs (only those whose ``success`` is ``success`` when given)."""
        q = sa.select(sa.func.count()).where(
            t.task_runs.c.user_id == user_id, t.task_runs.c.agent_id == agent_id
        )
        if success is not None:
            q = q.where(t.task_runs.c.success.is_(success))
        with self.db.read() as conn:
            return int(conn.execute(q).scalar() or 0)

    def list_runs(
        self, *, user_id: str, agent_id: str, limit: int = 50, offset: int = 0
    ) -> list[RunSummary]:
        """The last stored first (by store key: an ingested ledger's last line first, whatever
        its runs' ``started_at``), on every database. ``routed_flow`` is read by the database
        from the listed rows' ``meta`` (a JSON path), not by decoding it here."""
        c = t.task_runs.c
        q = (
            sa.select(
                c.run_id,
                c.task,
                c.success,
                c.tool_count,
                c.model_call_count,
                c.tokens,
                c.cost,
                c.classification,
                c.created_at,
                c.meta[("routed", "flow")].as_string(),
            )
            .where(c.user_id == user_id, c.agent_id == agent_id)
            .order_by(c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        with self.db.read() as conn:
            return [RunSummary(*tuple(row)) for row in conn.execute(q)]

    def get_run(self, run_id: str, *, user_id: str, agent_id: str) -> TaskRun:
        runs = self.load_runs([run_id], user_id=user_id, agent_id=agent_id)
        if not runs:
            raise NotFoundError(
                f"no task run {run_id!r} for user {user_id!r}, agent {agent_id!r}; "
                "list them with `soloflow runs list`"
            )
        return runs[0]

    def load_runs(self, run_ids: Sequence[str], *, user_id: str, agent_id: str) -> list[TaskRun]:
        """Full runs (calls included), in the order of ``run_ids``; unknown ids are left out."""
        c = t.task_runs.c
        out: dict[str, TaskRun] = {}
        with self.db.read() as conn:
            for start in range(0, len(run_ids), _BATCH):
                chunk = list(run_ids[start : start + _BATCH])
                rows = (
                    conn.execute(
                        sa.select(t.task_runs).where(
                            c.user_id == user_id, c.agent_id == agent_id, c.run_id.in_(chunk)
                        )
                    )
                    .mappings()
                    .all()
                )
                pks = [r["id"] for r in rows]
                calls, mcalls = _tool_calls_of(conn, pks), _model_calls_of(conn, pks)
                for r in rows:
                    out[r["run_id"]] = TaskRun.model_validate(
                        {
                            "run_id": r["run_id"],
                            "user_id": r["user_id"],
                            "agent_id": r["agent_id"],
                            "task": r["task"],
                            "answer": r["answer"],
                            "success": r["success"],
                            "cost": r["cost"],
                            "tokens": r["tokens"],
                            "tool_calls": calls.get(r["id"], []),
                            "model_calls": mcalls.get(r["id"], []),
                            "started_at": r["started_at"],
                            "ended_at": r["ended_at"],
                            "classification": r["classification"],
                            "meta": r["meta"] or {},
                        },
                        context=STORED,
                    )
        return [out[rid] for rid in run_ids if rid in out]

    def task_texts(self, run_ids: Sequence[str], *, user_id: str, agent_id: str) -> dict[str, str]:
        """Run id → its task text, for the runs of ``run_ids`` that have one."""
        r = t.task_runs.c
        out: dict[str, str] = {}
        with self.db.read() as conn:
            for start in range(0, len(run_ids), 500):
                chunk = list(run_ids[start : start + 500])
                q = sa.select(r.run_id, r.task).where(
                    r.user_id == user_id,
                    r.agent_id == agent_id,
                    r.run_id.in_(chunk),
                    r.task.is_not(None),
                )
                out.update({rid: task for rid, task in conn.execute(q) if task})
        return out

    def iter_sequences(
        self, *, user_id: str, agent_id: str, lookback: int | None = None
    ) -> Iterator[RunSequence]:
        """Tool-name sequences of the namespace's runs, oldest first (the newest
        ``lookback`` runs when given)."""
        c = t.task_runs.c
        runs_q = sa.select(c.id, c.run_id, c.success, c.cost, c.tokens).where(
            c.user_id == user_id, c.agent_id == agent_id
        )
        if lookback is not None:
            runs_q = runs_q.order_by(c.id.desc()).limit(lookback)
        with self.db.read() as conn:
            run_rows = sorted(conn.execute(runs_q).all(), key=lambda r: r[0])
            if not run_rows:
                return
            min_pk = run_rows[0][0]
            names: dict[int, list[str]] = {}
            errors: dict[int, list[bool]] = {}
            tc = t.tool_calls.c
            q = (
                sa.select(tc.run_pk, tc.name, tc.error)
                .where(tc.user_id == user_id, tc.agent_id == agent_id, tc.run_pk >= min_pk)
                .order_by(tc.run_pk, tc.seq)
            )
            for pk, name, err in conn.execute(q):
                names.setdefault(pk, []).append(name)
                errors.setdefault(pk, []).append(bool(err))
        for pk, run_id, success, cost, tokens in run_rows:
            yield RunSequence(
                run_id=run_id,
                names=tuple(names.get(pk, ())),
                errors=tuple(errors.get(pk, ())),
                success=success,
                cost=cost,
                tokens=tokens,
            )

    def read_tool_names(
        self,
        *,
        user_id: str,
        agent_id: str,
        lookback: int | None = None,
        include_failed: bool = True,
    ) -> ToolNameColumns:
        """The namespace's tool-name sequences as integer-coded arrays, oldest run first (the
        newest ``lookback`` runs when given; without the runs whose ``success`` is False
        unless ``include_failed``).

        :meth:`iter_sequences` as columns, for mining at scale: on SQLite each batch of
        runs is read as a few strings that the database concatenates in index order, not
        as a Python row per call, into arrays allocated once (1M runs, 8.5M calls: 10–11 s
        here, against 7–8 s to fetch the bare name column with ``fetchall`` — which then
        holds a Python tuple per call, ~1 GB, where these columns take ~270 MB; see
        benchmarks/RESULTS.md). On a SQLite file two connections read the batches at once
        (SQLite works without the GIL); each batch is checked against the runs' counts
        read first, and read again row by row on this connection if it does not add up.

        Examples:
            >>> cols = store.read_tool_names(user_id="alice", agent_id="bot")
            >>> [cols.names[c] for c in cols.codes[cols.offsets[0] : cols.offsets[1]]]
            ['search', 'book']
        """
        return read_tool_names(
            self.db, user_id, agent_id, lookback=lookback, include_failed=include_failed
        )

    def read_evidence(
        self, run_pks: Sequence[int], *, user_id: str, agent_id: str
    ) -> dict[int, EvidenceRun]:
        """The runs ``run_pks`` (store keys, as :meth:`read_tool_names` gives them) with
        their calls, keyed by pk, as much of them as the detector reads: task text, tool
        calls (name, arguments, output, error, meta) and model calls' usage. Keys of
        another namespace are left out. For full :class:`TaskRun` models use
        :meth:`load_runs`."""
        with self.db.read() as conn:
            return read_evidence(conn, user_id, agent_id, pks=[int(pk) for pk in run_pks])
