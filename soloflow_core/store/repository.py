"""The store: the only code that opens database sessions.

Every method takes the caller's namespace (``user_id``, ``agent_id``) and never returns
another namespace's rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from soloflow_core.errors import NotFoundError, StoreError
from soloflow_core.models import FlowCandidate, FlowDefinition, TaskRun
from soloflow_core.store import schema as t
from soloflow_core.store.columns import (
    EvidenceRun,
    ToolNameColumns,
    read_evidence,
    read_tool_names,
)
from soloflow_core.store.engine import (
    WRITE_OPTION,
    create_store_engine,
    migrate,
    resolve_database_url,
    safe_url,
)
from soloflow_core.store.evidence import FlowEvidenceStore
from soloflow_core.store.flowruns import FlowRunStore
from soloflow_core.store.namespaces import NamespaceStore
from soloflow_core.store.procedural import ProceduralStore, insert_flow_version
from soloflow_core.store.skills import SkillImportStore
from soloflow_core.store.tokens import TokenStore
from soloflow_core.store.traces import TraceStore
from soloflow_core.store.usage import UsageStore
from soloflow_core.store.writer import (
    AnyRun,
    insert_returning,
    insert_sqlite,
    now,
    sqlite_stamp,
    write_one_sqlite,
)

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


_LATEST_VERSION = {
    d: f"SELECT MAX(version) FROM sf_flows WHERE user_id = {ph} AND agent_id = {ph} AND name = {ph}"
    for d, ph in (("sqlite", "?"), ("postgresql", "%s"))
}
"""``Store.latest_flow_version`` through the driver: one round trip on PostgreSQL."""


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


@dataclass(frozen=True, slots=True)
class RunSequence:
    """What the detector reads of a run: its tool names in order and its outcome."""

    run_id: str
    names: tuple[str, ...]
    errors: tuple[bool, ...]
    success: bool | None
    cost: float | None
    tokens: int | None


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """A registered flow version."""

    flow: FlowDefinition
    source: str
    candidate_id: str | None
    created_at: datetime


class Store(
    FlowRunStore,
    ProceduralStore,
    FlowEvidenceStore,
    TokenStore,
    SkillImportStore,
    UsageStore,
    NamespaceStore,
    TraceStore,
):
    """Runs, candidates, flows and their evidence, flow runs, API tokens and skill imports in
    one database (SQLite or PostgreSQL).

    Example:
        >>> store = Store.open("sqlite:///:memory:")
        >>> store.add_runs([TaskRun(run_id="r1")])
        1
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        dialect = engine.dialect
        self._stamp = sqlite_stamp(dialect) if dialect.name == "sqlite" else None

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        """Open (and create or migrate) the database at ``url``; see ``resolve_database_url``."""
        resolved = resolve_database_url(url)
        engine = create_store_engine(resolved)
        try:
            migrate(engine)
        except StoreError:
            engine.dispose()
            raise
        except sa.exc.SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot open database {safe_url(resolved)!r}: {exc}") from exc
        return cls(engine)

    @property
    def url(self) -> str:
        return safe_url(str(self.engine.url))

    def close(self) -> None:
        self._close_flow_runs()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ task runs

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
        if self._stamp is None:
            return self._write_batch([run]) == 1
        raw = self.engine.raw_connection()  # pooled: one per thread
        try:
            driver: sqlite3.Connection = raw.driver_connection  # type: ignore[assignment]
            return write_one_sqlite(driver, run, now(), stamp=self._stamp)
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
        with self._writer.begin() as conn:
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
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def list_runs(
        self, *, user_id: str, agent_id: str, limit: int = 50, offset: int = 0
    ) -> list[RunSummary]:
        """Newest first."""
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
            )
            .where(c.user_id == user_id, c.agent_id == agent_id)
            .order_by(c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        with self.engine.connect() as conn:
            return [RunSummary(*row) for row in conn.execute(q)]

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
        with self.engine.connect() as conn:
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
                        }
                    )
        return [out[rid] for rid in run_ids if rid in out]

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
        with self.engine.connect() as conn:
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
        with self.engine.connect() as conn:
            return read_tool_names(
                conn, user_id, agent_id, lookback=lookback, include_failed=include_failed
            )

    def read_evidence(
        self, run_pks: Sequence[int], *, user_id: str, agent_id: str
    ) -> dict[int, EvidenceRun]:
        """The runs ``run_pks`` (store keys, as :meth:`read_tool_names` gives them) with
        their calls, keyed by pk, as much of them as the detector reads: task text, tool
        calls (name, arguments, output, error, meta) and model calls' usage. Keys of
        another namespace are left out. For full :class:`TaskRun` models use
        :meth:`load_runs`."""
        with self.engine.connect() as conn:
            return read_evidence(conn, user_id, agent_id, pks=[int(pk) for pk in run_pks])

    # ------------------------------------------------------------------ candidates

    def save_candidates(self, candidates: Iterable[FlowCandidate]) -> None:
        """Insert new candidates; refresh pending ones; never reopen a decided one."""
        stamp = now()
        with self._writer.begin() as conn:
            for cand in candidates:
                body = cand.model_dump(mode="json")
                existing = conn.execute(
                    sa.select(t.candidates.c.status).where(t.candidates.c.id == cand.id)
                ).scalar()
                if existing is None:
                    conn.execute(
                        sa.insert(t.candidates).values(
                            id=cand.id,
                            user_id=cand.user_id,
                            agent_id=cand.agent_id,
                            dedupe_key=cand.dedupe_key,
                            status=cand.status,
                            occurrence_count=cand.occurrence_count,
                            estimated_token_savings=cand.estimated_token_savings,
                            body=body,
                            created_at=stamp,
                            updated_at=stamp,
                        )
                    )
                elif existing == "pending":
                    conn.execute(
                        sa.update(t.candidates)
                        .where(t.candidates.c.id == cand.id)
                        .values(
                            occurrence_count=cand.occurrence_count,
                            estimated_token_savings=cand.estimated_token_savings,
                            body=body,
                            updated_at=stamp,
                        )
                    )

    def _candidate_from_row(self, row: Any) -> FlowCandidate:
        body = dict(row["body"])
        body["status"] = row["status"]
        body["created_at"] = row["created_at"]
        return FlowCandidate.model_validate(body)

    def get_candidate(self, candidate_id: str, *, user_id: str, agent_id: str) -> FlowCandidate:
        c = t.candidates.c
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    sa.select(t.candidates).where(
                        c.id == candidate_id, c.user_id == user_id, c.agent_id == agent_id
                    )
                )
                .mappings()
                .first()
            )
        if row is None:
            raise NotFoundError(
                f"no candidate {candidate_id!r} for user {user_id!r}, agent {agent_id!r}; "
                "run `soloflow detect` to list candidates"
            )
        return self._candidate_from_row(row)

    def list_candidates(
        self,
        *,
        user_id: str,
        agent_id: str,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[FlowCandidate]:
        """The namespace's candidates, largest estimated savings first (``limit`` of them
        from ``offset`` when given)."""
        c = t.candidates.c
        q = sa.select(t.candidates).where(c.user_id == user_id, c.agent_id == agent_id)
        if status is not None:
            q = q.where(c.status == status)
        q = q.order_by(c.estimated_token_savings.desc(), c.id).limit(limit).offset(offset or None)
        with self.engine.connect() as conn:
            return [self._candidate_from_row(r) for r in conn.execute(q).mappings()]

    def decided_dedupe_keys(self, *, user_id: str, agent_id: str) -> dict[str, str]:
        """dedupe key → status, for every candidate already stored in the namespace."""
        c = t.candidates.c
        q = sa.select(c.dedupe_key, c.status).where(c.user_id == user_id, c.agent_id == agent_id)
        with self.engine.connect() as conn:
            return {k: s for k, s in conn.execute(q)}

    def set_candidate_status(
        self, candidate_id: str, status: str, *, user_id: str, agent_id: str
    ) -> FlowCandidate:
        cand = self.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
        with self._writer.begin() as conn:
            conn.execute(
                sa.update(t.candidates)
                .where(t.candidates.c.id == candidate_id)
                .values(status=status, updated_at=now())
            )
        return cand.model_copy(update={"status": status})

    # ------------------------------------------------------------------ flows

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
        with self._writer.begin() as conn:
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
        from soloflow_core.store.journal_io import driver_statement

        sql = _LATEST_VERSION.get(self.engine.dialect.name)
        if sql is None:
            c = t.flows.c
            q = sa.select(sa.func.max(c.version)).where(
                c.user_id == user_id, c.agent_id == agent_id, c.name == name
            )
            with self.engine.connect() as conn:
                return conn.execute(q).scalar()
        engine = self.engine if self.engine.dialect.name == "sqlite" else self._journal_engine()
        rows = driver_statement(engine, sql, (user_id, agent_id, name))
        return rows[0][0] if rows else None

    def get_flow(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> FlowRecord:
        c = t.flows.c
        q = sa.select(t.flows).where(c.user_id == user_id, c.agent_id == agent_id, c.name == name)
        q = q.where(c.version == version) if version is not None else q.order_by(c.version.desc())
        with self.engine.connect() as conn:
            row = conn.execute(q.limit(1)).mappings().first()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}; list flows with `soloflow flows list`"
            )
        return FlowRecord(
            flow=FlowDefinition.model_validate(row["definition"]),
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
        with self.engine.connect() as conn:
            return [
                FlowRecord(
                    flow=FlowDefinition.model_validate(r["definition"]),
                    source=r["source"],
                    candidate_id=r["candidate_id"],
                    created_at=r["created_at"],
                )
                for r in conn.execute(q).mappings()
            ]
