"""The store: the only code that opens database sessions.

Every method takes the caller's namespace (``user_id``, ``agent_id``) and never returns
another namespace's rows.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from soloflow_core.errors import NotFoundError, StoreError
from soloflow_core.models import FlowCandidate, FlowDefinition, ModelCall, TaskRun, ToolCall
from soloflow_core.store import schema as t
from soloflow_core.store.engine import (
    WRITE_OPTION,
    create_store_engine,
    migrate,
    resolve_database_url,
    safe_url,
)
from soloflow_core.store.writer import (
    AnyRun,
    insert_returning,
    insert_sqlite,
    jsonable,
    now,
    sqlite_stamp,
    storable_text,
    write_one_sqlite,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_BATCH = 5000
"""Runs per write transaction: large batches amortise the per-statement cost."""
_IN_CHUNK = 500
"""Bound parameters per ``IN (...)`` list: well under every database's limit."""



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
class ToolNameColumns:
    """A namespace's runs as arrays, oldest first: what a miner reads (see
    :meth:`Store.read_tool_names`). ``R`` runs, ``C`` tool calls in all.

    Run ``r``'s calls are ``codes[offsets[r]:offsets[r + 1]]``, and ``names[code]`` is a
    call's tool name: ``CodedLedger(codes, offsets, names)`` in
    :mod:`soloflow_core.mining.fast` is this ledger.
    """

    run_pks: npt.NDArray[np.int64]
    """``(R,)`` the runs' store keys, ascending (the order they were stored in)."""
    run_ids: list[str]
    """``R`` run ids."""
    offsets: npt.NDArray[np.int64]
    """``(R + 1,)`` where each run's calls start in ``codes``; ``offsets[-1] == C``."""
    codes: npt.NDArray[np.int64]
    """``(C,)`` each call's tool, as an index into ``names``."""
    names: list[str]
    """The distinct tool names, in order of first appearance."""
    errors: npt.NDArray[np.bool_]
    """``(C,)`` True where the call errored (False for false or unknown)."""
    success: npt.NDArray[np.int8]
    """``(R,)`` 1 for a run that succeeded, 0 for one that failed, -1 when unknown."""
    cost: npt.NDArray[np.float64]
    """``(R,)`` the run's cost, NaN when unknown."""
    tokens: npt.NDArray[np.float64]
    """``(R,)`` the run's total tokens, NaN when unknown."""

    @property
    def run_count(self) -> int:
        return len(self.run_pks)


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """A registered flow version."""

    flow: FlowDefinition
    source: str
    candidate_id: str | None
    created_at: datetime


class Store:
    """Runs, candidates, flows and flow runs in one database (SQLite or PostgreSQL).

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
            return write_one_sqlite(driver, run, now(), self._stamp)
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
                c.run_id, c.task, c.success, c.tool_count, c.model_call_count,
                c.tokens, c.cost, c.classification, c.created_at,
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
                rows = conn.execute(
                    sa.select(t.task_runs).where(
                        c.user_id == user_id, c.agent_id == agent_id, c.run_id.in_(chunk)
                    )
                ).mappings().all()
                pks = [r["id"] for r in rows]
                calls: dict[int, list[ToolCall]] = {pk: [] for pk in pks}
                for cr in conn.execute(
                    sa.select(t.tool_calls)
                    .where(t.tool_calls.c.run_pk.in_(pks))
                    .order_by(t.tool_calls.c.run_pk, t.tool_calls.c.seq)
                ).mappings():
                    calls[cr["run_pk"]].append(
                        ToolCall(
                            name=cr["name"], args=cr["args"] or {}, output=cr["output"],
                            error=cr["error"], duration_ms=cr["duration_ms"],
                            tool_call_id=cr["tool_call_id"], meta=cr["meta"] or {},
                        )
                    )
                mcalls: dict[int, list[ModelCall]] = {pk: [] for pk in pks}
                for mr in conn.execute(
                    sa.select(t.model_calls)
                    .where(t.model_calls.c.run_pk.in_(pks))
                    .order_by(t.model_calls.c.run_pk, t.model_calls.c.seq)
                ).mappings():
                    mcalls[mr["run_pk"]].append(
                        ModelCall(
                            model=mr["model"], input_tokens=mr["input_tokens"],
                            output_tokens=mr["output_tokens"], total_tokens=mr["total_tokens"],
                            duration_ms=mr["duration_ms"],
                            tool_calls_requested=mr["tool_calls_requested"],
                        )
                    )
                for r in rows:
                    out[r["run_id"]] = TaskRun(
                        run_id=r["run_id"], user_id=r["user_id"], agent_id=r["agent_id"],
                        task=r["task"], success=r["success"], cost=r["cost"], tokens=r["tokens"],
                        tool_calls=calls[r["id"]], model_calls=mcalls[r["id"]],
                        started_at=r["started_at"], ended_at=r["ended_at"],
                        classification=r["classification"], meta=r["meta"] or {},
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
        as a Python row per call (1M runs, 8M calls: about half the time of fetching the
        name column alone).

        Example:
            >>> cols = store.read_tool_names(user_id="alice", agent_id="bot")
            >>> [cols.names[c] for c in cols.codes[cols.offsets[0] : cols.offsets[1]]]
            ['search', 'book']
        """
        with self.engine.connect() as conn:
            return _read_tool_names(conn, user_id, agent_id, lookback, include_failed)

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
                            id=cand.id, user_id=cand.user_id, agent_id=cand.agent_id,
                            dedupe_key=cand.dedupe_key, status=cand.status,
                            occurrence_count=cand.occurrence_count,
                            estimated_token_savings=cand.estimated_token_savings,
                            body=body, created_at=stamp, updated_at=stamp,
                        )
                    )
                elif existing == "pending":
                    conn.execute(
                        sa.update(t.candidates)
                        .where(t.candidates.c.id == cand.id)
                        .values(
                            occurrence_count=cand.occurrence_count,
                            estimated_token_savings=cand.estimated_token_savings,
                            body=body, updated_at=stamp,
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
            row = conn.execute(
                sa.select(t.candidates).where(
                    c.id == candidate_id, c.user_id == user_id, c.agent_id == agent_id
                )
            ).mappings().first()
        if row is None:
            raise NotFoundError(
                f"no candidate {candidate_id!r} for user {user_id!r}, agent {agent_id!r}; "
                "run `soloflow detect` to list candidates"
            )
        return self._candidate_from_row(row)

    def list_candidates(
        self, *, user_id: str, agent_id: str, status: str | None = None
    ) -> list[FlowCandidate]:
        c = t.candidates.c
        q = sa.select(t.candidates).where(c.user_id == user_id, c.agent_id == agent_id)
        if status is not None:
            q = q.where(c.status == status)
        q = q.order_by(c.estimated_token_savings.desc(), c.id)
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
        """Store ``flow`` as the next version of its name; returns it with that version."""
        c = t.flows.c
        with self._writer.begin() as conn:
            latest = conn.execute(
                sa.select(sa.func.max(c.version)).where(
                    c.user_id == user_id, c.agent_id == agent_id, c.name == flow.name
                )
            ).scalar()
            versioned = flow.model_copy(update={"version": (latest or 0) + 1})
            conn.execute(
                sa.insert(t.flows).values(
                    user_id=user_id, agent_id=agent_id, name=flow.name,
                    version=versioned.version, source=source, candidate_id=candidate_id,
                    definition=versioned.model_dump(mode="json"), created_at=now(),
                )
            )
        return versioned

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

    # ------------------------------------------------------------------ flow runs

    def start_flow_run(
        self, flow: FlowDefinition, inputs: dict[str, Any], *, user_id: str, agent_id: str
    ) -> str:
        run_id = "frun_" + uuid.uuid4().hex
        with self._writer.begin() as conn:
            conn.execute(
                sa.insert(t.flow_runs).values(
                    id=run_id, user_id=user_id, agent_id=agent_id, flow_name=flow.name,
                    flow_version=flow.version, status="running", inputs=jsonable(inputs),
                    started_at=now(),
                )
            )
        return run_id

    def finish_flow_run(
        self, run_id: str, *, status: str, outputs: Any = None, error: str | None = None
    ) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                sa.update(t.flow_runs)
                .where(t.flow_runs.c.id == run_id)
                .values(
                    status=status,
                    outputs=jsonable(outputs),
                    error=None if error is None else storable_text(error),
                    ended_at=now(),
                )
            )

    def list_flow_runs(
        self, *, user_id: str, agent_id: str, flow_name: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        c = t.flow_runs.c
        q = sa.select(t.flow_runs).where(c.user_id == user_id, c.agent_id == agent_id)
        if flow_name is not None:
            q = q.where(c.flow_name == flow_name)
        q = q.order_by(c.started_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]


# ---------------------------------------------------------------------- reading name columns

_CALLS_PER_READ = 1 << 18
_SEP = "\x1f"


class _Vocabulary(dict[str, int]):
    """Tool name → code, a new name taking the next code."""

    def __missing__(self, name: str) -> int:
        code = self[name] = len(self)
        return code


def _read_tool_names(
    conn: Connection, user: str, agent: str, lookback: int | None, include_failed: bool
) -> ToolNameColumns:
    import numpy as np

    c = t.task_runs.c
    min_pk = 0
    if lookback is not None:
        newest = sa.select(c.id).where(c.user_id == user, c.agent_id == agent)
        newest = newest.order_by(c.id.desc()).limit(1).offset(max(lookback, 1) - 1)
        min_pk = conn.execute(newest).scalar() or 0
    fast = conn.dialect.name == "sqlite"
    runs = (_sqlite_run_columns(conn, user, agent, min_pk) if fast else None) or _run_columns(
        conn, user, agent, min_pk
    )
    pks, run_ids, counts, success, cost, tokens = runs
    offsets = np.zeros(len(pks) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    vocab = _Vocabulary()
    codes: list[np.ndarray] = [np.zeros(0, np.int64)]
    errors: list[np.ndarray] = [np.zeros(0, np.bool_)]
    for lo, hi in _run_chunks(offsets):
        part = _sqlite_chunk(conn, user, agent, pks, offsets, lo, hi, vocab) if fast else None
        if part is None:  # PostgreSQL, or a chunk the quick read could not vouch for
            part = _ordered_chunk(conn, user, agent, pks, offsets, lo, hi, vocab)
        codes.append(part[0])
        errors.append(part[1])
    cols = ToolNameColumns(
        run_pks=pks,
        run_ids=run_ids,
        offsets=offsets,
        codes=np.concatenate(codes),
        names=list(vocab),
        errors=np.concatenate(errors),
        success=success,
        cost=cost,
        tokens=tokens,
    )
    return cols if include_failed else _without_failed(cols)


_RunColumns = tuple[Any, list[str], Any, Any, Any, Any]


def _run_columns(conn: Connection, user: str, agent: str, min_pk: int) -> _RunColumns:
    """pks, run ids, tool counts, success (1/0/-1), cost and tokens (NaN for unknown) of the
    namespace's runs from ``min_pk`` on, in pk order (any database)."""
    import numpy as np

    c = t.task_runs.c
    q = sa.select(c.id, c.run_id, c.tool_count, c.success, c.cost, c.tokens).where(
        c.user_id == user, c.agent_id == agent, c.id >= min_pk
    )
    rows = conn.execute(q.order_by(c.id)).all()
    n = len(rows)
    return (
        np.fromiter((r[0] for r in rows), np.int64, n),
        [r[1] for r in rows],
        np.fromiter((r[2] for r in rows), np.int64, n),
        np.fromiter((-1 if r[3] is None else int(r[3]) for r in rows), np.int8, n),
        np.array([r[4] for r in rows], dtype=np.float64),  # None becomes NaN
        np.array([r[5] for r in rows], dtype=np.float64),
    )


def _sqlite_run_columns(
    conn: Connection, user: str, agent: str, min_pk: int
) -> _RunColumns | None:
    """:func:`_run_columns` as six strings SQLite concatenates while it walks the namespace
    index (``quote`` writes a REAL that reads back exactly); None if they do not add up."""
    import numpy as np

    row = conn.exec_driver_sql(
        "SELECT count(*), group_concat(id), group_concat(run_id, char(31)), "
        "group_concat(tool_count), group_concat(ifnull(success, 2), ''), "
        "group_concat(CASE WHEN cost IS NULL THEN 'nan' ELSE quote(cost) END), "
        "group_concat(ifnull(tokens, 'nan')) FROM (SELECT * FROM sf_task_runs "
        "INDEXED BY ix_sf_task_runs_ns_id WHERE user_id = ? AND agent_id = ? AND id >= ? "
        "ORDER BY user_id, agent_id, id)",
        (user, agent, min_pk),
    ).one()
    n = row[0]
    if not n:
        return None
    pks = np.fromstring(row[1], dtype=np.int64, sep=",")
    run_ids = row[2].split(_SEP)
    counts = np.fromstring(row[3], dtype=np.int64, sep=",")
    success = np.frombuffer(row[4].encode("ascii"), dtype=np.uint8).astype(np.int8) - ord("0")
    cost = np.fromstring(row[5], dtype=np.float64, sep=",")
    tokens = np.fromstring(row[6], dtype=np.float64, sep=",")
    if not all(len(a) == n for a in (pks, run_ids, counts, success, cost, tokens)):
        return None
    if n > 1 and not bool((np.diff(pks) > 0).all()):
        return None
    success[success == 2] = -1
    return pks, run_ids, counts, success, cost, tokens


def _run_chunks(offsets: Any) -> Iterator[tuple[int, int]]:
    """Runs ``[lo, hi)`` holding about ``_CALLS_PER_READ`` calls each."""
    import numpy as np

    n = len(offsets) - 1
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(offsets, offsets[lo] + _CALLS_PER_READ, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        yield lo, hi
        lo = hi


def _sqlite_chunk(
    conn: Connection, user: str, agent: str, pks: Any, offsets: Any, lo: int, hi: int,
    vocab: _Vocabulary,
) -> tuple[Any, Any] | None:
    """Runs ``[lo, hi)``'s calls as strings SQLite concatenates while it scans the table:
    the names, and one digit per call (2 if ``seq`` is 0, plus 1 if it errored).

    Scanning the table in rowid order reads half the pages of walking the ``(run_pk,
    seq)`` index. It is the calls' order when their rowids grow along that index, which the
    store's writers ensure (a run's calls are written in order, in the transaction that
    writes the run); the index, read alone, checks it. None when anything does not add
    up, for the row-by-row read to redo.
    """
    import numpy as np

    lo_pk, hi_pk = int(pks[lo]), int(pks[hi - 1])
    expected = int(offsets[hi] - offsets[lo])
    if not expected:
        return np.zeros(0, np.int64), np.zeros(0, np.bool_)
    in_index_order = conn.exec_driver_sql(
        "SELECT group_concat(id) FROM (SELECT id FROM sf_tool_calls "
        "INDEXED BY ix_sf_tool_calls_run_seq WHERE run_pk BETWEEN ? AND ? "
        "ORDER BY run_pk, seq)",
        (lo_pk, hi_pk),
    ).scalar()
    if not in_index_order:
        return None
    rowids = np.fromstring(in_index_order, dtype=np.int64, sep=",")
    if len(rowids) > 1 and not bool((np.diff(rowids) > 0).all()):
        return None
    names, flags, count = conn.exec_driver_sql(
        "SELECT group_concat(name, char(31)), group_concat((seq = 0) * 2 + (error IS 1), ''), "
        "count(*) FROM sf_tool_calls WHERE id BETWEEN ? AND ? AND run_pk BETWEEN ? AND ? "
        "AND user_id = ? AND agent_id = ?",
        (int(rowids[0]), int(rowids[-1]), lo_pk, hi_pk, user, agent),
    ).one()
    if count != expected:
        return None
    parts = names.split(_SEP)
    digits = np.frombuffer(flags.encode("ascii"), dtype=np.uint8) - ord("0")
    if len(parts) != count or len(digits) != count:
        return None
    starts = offsets[lo:hi] - offsets[lo]
    nonempty = starts[np.diff(offsets[lo : hi + 1]) > 0]
    if not np.array_equal(np.flatnonzero(digits >= 2), nonempty):
        return None
    codes = np.fromiter(map(vocab.__getitem__, parts), np.int64, count)
    return codes, (digits & 1).astype(np.bool_)


def _ordered_chunk(
    conn: Connection, user: str, agent: str, pks: Any, offsets: Any, lo: int, hi: int,
    vocab: _Vocabulary,
) -> tuple[Any, Any]:
    """Runs ``[lo, hi)``'s calls row by row, in ``(run_pk, seq)`` order (any database)."""
    import numpy as np

    tc = t.tool_calls.c
    q = (
        sa.select(tc.run_pk, tc.name, tc.error)
        .where(
            tc.user_id == user, tc.agent_id == agent,
            tc.run_pk.between(int(pks[lo]), int(pks[hi - 1])),
        )
        .order_by(tc.run_pk, tc.seq)
    )
    rows = conn.execute(q).all()
    run_pk = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    wanted = pks[lo:hi]
    keep = np.isin(run_pk, wanted)  # runs of the range outside the lookback or namespace
    per_run = np.bincount(np.searchsorted(wanted, run_pk[keep]), minlength=hi - lo)
    if not np.array_equal(per_run, np.diff(offsets[lo : hi + 1])):
        raise StoreError(
            "the tool calls stored do not match their runs' tool_count; "
            "was the database edited by hand?"
        )
    codes = np.fromiter((vocab[r[1]] for r, k in zip(rows, keep, strict=True) if k), np.int64)
    errors = np.fromiter((r[2] is True for r, k in zip(rows, keep, strict=True) if k), np.bool_)
    return codes, errors


def _without_failed(cols: ToolNameColumns) -> ToolNameColumns:
    import numpy as np

    keep = cols.success != 0
    lengths = np.diff(cols.offsets)[keep]
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    per_call = np.repeat(keep, np.diff(cols.offsets))
    return ToolNameColumns(
        run_pks=cols.run_pks[keep],
        run_ids=[r for r, k in zip(cols.run_ids, keep, strict=True) if k],
        offsets=offsets,
        codes=cols.codes[per_call],
        names=cols.names,
        errors=cols.errors[per_call],
        success=cols.success[keep],
        cost=cols.cost[keep],
        tokens=cols.tokens[keep],
    )
