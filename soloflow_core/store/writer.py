"""Writing task runs: the rows of the run tables, each database's fastest way.

Private to :mod:`soloflow_core.store`: :class:`~soloflow_core.store.Store` calls
:func:`insert_sqlite` / :func:`insert_returning` inside its batch transactions, and
:func:`write_one_sqlite` for one run (its own transaction, on the driver's connection). A run
arrives as a :class:`TaskRun` (an agent's capture, an API caller) or as a :class:`RunRow`, the
same fields already checked by :func:`soloflow_core.ledger.ingest`'s fast lane, which builds
no pydantic model.

On SQLite every table's rows go through the sqlite3 driver's ``executemany`` as positional
tuples; :func:`insert_returning` (any database) is the reference, and a test compares the
rows the two store. Ingest into SQLite writes rows that :mod:`soloflow_core.ledger._rows`
built straight from the ledger's lines with :func:`insert_sqlite_bulk` (no run objects at all).
How values become storable text and JSON is :mod:`soloflow_core.store.json_values`'.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from soloflow_core.models import ModelCall, TaskRun, ToolCall
from soloflow_core.store import schema as t
from soloflow_core.store.json_values import json_text, jsonable, parsed_json_text, storable_text


@dataclass(slots=True)
class ToolCallRow:
    """:class:`ToolCall`'s fields, checked by the caller."""

    name: str
    args: dict[str, Any]
    output: Any
    error: bool | None
    duration_ms: float | None
    tool_call_id: str | None
    meta: dict[str, Any]


@dataclass(slots=True)
class ModelCallRow:
    """:class:`ModelCall`'s fields, checked by the caller."""

    model: str | None
    input_tokens: int
    output_tokens: int
    total_tokens: int
    duration_ms: float | None
    tool_calls_requested: int


@dataclass(slots=True)
class RunRow:
    """:class:`TaskRun`'s fields, checked by the caller: what ingest writes without building
    a pydantic model per call (that costs more than the write).

    ``args``, ``output`` and the ``meta`` fields hold what a JSON parser returned (dicts with
    text keys, lists, text without lone surrogates, numbers, booleans, None), which lets the
    writer serialise them with :func:`parsed_json_text`.
    """

    run_id: str
    user_id: str
    agent_id: str
    task: str | None
    success: bool | None
    cost: float | None
    tokens: int | None
    tool_calls: list[ToolCallRow]
    model_calls: list[ModelCallRow]
    started_at: datetime | None
    ended_at: datetime | None
    classification: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None

    def to_task_run(self) -> TaskRun:
        """The same run as a validated :class:`TaskRun`."""
        return TaskRun(
            run_id=self.run_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            task=self.task,
            answer=self.answer,
            success=self.success,
            cost=self.cost,
            tokens=self.tokens,
            tool_calls=[ToolCall(**_fields(c)) for c in self.tool_calls],
            model_calls=[ModelCall(**_fields(m)) for m in self.model_calls],
            started_at=self.started_at,
            ended_at=self.ended_at,
            classification=self.classification,
            meta=self.meta,
        )


def _fields(row: ToolCallRow | ModelCallRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in row.__slots__}


AnyRun = TaskRun | RunRow
"""What the write functions take."""
AnyToolCall = ToolCall | ToolCallRow
AnyModelCall = ModelCall | ModelCallRow


def _calls(r: AnyRun) -> tuple[Sequence[AnyToolCall], Sequence[AnyModelCall]]:
    return r.tool_calls, r.model_calls


def now() -> datetime:
    return datetime.now(UTC)


def _run_row(r: AnyRun, created: datetime) -> dict[str, Any]:
    return {
        "run_id": r.run_id,
        "user_id": r.user_id,
        "agent_id": r.agent_id,
        "task": jsonable(r.task),
        "answer": jsonable(r.answer),
        "success": r.success,
        "cost": jsonable(r.cost),
        "tokens": r.tokens,
        "tool_count": len(r.tool_calls),
        "model_call_count": len(r.model_calls),
        "classification": r.classification,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "created_at": created,
        "meta": jsonable(r.meta),
    }


def insert_returning(conn: Connection, fresh: Sequence[AnyRun], created: datetime) -> None:
    """Any database: run pks come back from ``INSERT ... RETURNING``, in parameter order."""
    result = conn.execute(
        sa.insert(t.task_runs).returning(t.task_runs.c.id, sort_by_parameter_order=True),
        [_run_row(r, created) for r in fresh],
    )
    pks = [row[0] for row in result]
    calls: list[dict[str, Any]] = []
    models: list[dict[str, Any]] = []
    for pk, r in zip(pks, fresh, strict=True):
        user, agent = r.user_id, r.agent_id
        tool_calls, model_calls = _calls(r)
        for i, c in enumerate(tool_calls):
            calls.append(
                {
                    "run_pk": pk,
                    "user_id": user,
                    "agent_id": agent,
                    "seq": i,
                    "name": c.name,
                    "args": jsonable(c.args),
                    "output": jsonable(c.output),
                    "error": c.error,
                    "duration_ms": jsonable(c.duration_ms),
                    "tool_call_id": c.tool_call_id,
                    "meta": jsonable(c.meta) if c.meta else None,
                }
            )
        for i, m in enumerate(model_calls):
            models.append(
                {
                    "run_pk": pk,
                    "user_id": user,
                    "agent_id": agent,
                    "seq": i,
                    "model": m.model,
                    "input_tokens": m.input_tokens,
                    "output_tokens": m.output_tokens,
                    "total_tokens": m.total_tokens,
                    "duration_ms": jsonable(m.duration_ms),
                    "tool_calls_requested": m.tool_calls_requested,
                }
            )
    if calls:
        conn.execute(sa.insert(t.tool_calls), calls)
    if models:
        conn.execute(sa.insert(t.model_calls), models)


# Python's sqlite3 binds an int, float or str directly but sends None and bool through its
# adapter lookup, the larger part of the cost of a tool-call row. So no None or
# bool is bound: a nullable text column takes int 0 for NULL (``NULLIF(?, 0)``; text never
# equals an integer), a nullable boolean 1/0, or 2 for NULL (``NULLIF(?, 2)``), and a REAL
# column NaN, which SQLite stores as NULL (as ``jsonable`` turns NaN and infinities into
# None, so does ``_real``). The rows stored are those of ``insert_returning``; a test
# compares the tables.
_TEXT_OR_NULL = "NULLIF(?, 0)"
_BOOL_OR_NULL = "NULLIF(?, 2)"
_BOOL_PARAM = {True: 1, False: 0, None: 2}
_NAN = float("nan")


def _insert_sql(table: sa.Table, columns: dict[str, str], suffix: str = "") -> str:
    names = ", ".join(columns)
    return f"INSERT INTO {table.name} ({names}) VALUES ({', '.join(columns.values())}){suffix}"


_RUN_COLUMNS = {
    "id": "?",
    "run_id": "?",
    "user_id": "?",
    "agent_id": "?",
    "task": _TEXT_OR_NULL,
    "success": _BOOL_OR_NULL,
    "cost": "?",
    "tokens": "?",
    "tool_count": "?",
    "model_call_count": "?",
    "classification": _TEXT_OR_NULL,
    "started_at": _TEXT_OR_NULL,
    "ended_at": _TEXT_OR_NULL,
    "created_at": "?",
    "meta": "?",
    "answer": _TEXT_OR_NULL,
}
_SQLITE_INSERT_RUNS = _insert_sql(t.task_runs, _RUN_COLUMNS)
# One run (an agent's capture): no existence check first, the unique key says it.
# ``id`` NULL lets SQLite assign it.
_SQLITE_INSERT_RUN_IF_NEW = _insert_sql(
    t.task_runs, _RUN_COLUMNS, " ON CONFLICT (user_id, agent_id, run_id) DO NOTHING"
)
_SQLITE_INSERT_CALLS = _insert_sql(
    t.tool_calls,
    {
        "run_pk": "?",
        "user_id": "?",
        "agent_id": "?",
        "seq": "?",
        "name": "?",
        "args": "?",
        "output": "?",
        "error": _BOOL_OR_NULL,
        "duration_ms": "?",
        "tool_call_id": _TEXT_OR_NULL,
        "meta": "?",
    },
)
_SQLITE_INSERT_MODELS = _insert_sql(
    t.model_calls,
    {
        "run_pk": "?",
        "user_id": "?",
        "agent_id": "?",
        "seq": "?",
        "model": _TEXT_OR_NULL,
        "input_tokens": "?",
        "output_tokens": "?",
        "total_tokens": "?",
        "duration_ms": "?",
        "tool_calls_requested": "?",
    },
)


def _real(value: float | None) -> float:
    """A REAL column's parameter: NaN (stored as NULL) for None, NaN and infinities."""
    return value if value is not None and value - value == 0 else _NAN


def sqlite_stamp(dialect: sa.Dialect) -> Callable[[datetime], str]:
    """How SQLAlchemy writes a timestamp column on SQLite (text), as a plain function; a UTC
    time (``datetime.now(UTC)``) is formatted by one C call, to the same text."""
    stamp: Callable[[datetime], str] | None = t.TS.dialect_impl(dialect).bind_processor(dialect)
    assert stamp is not None

    def utc_stamp(value: datetime) -> str:
        if value.tzinfo is UTC:
            return value.replace(tzinfo=None).isoformat(" ", "microseconds")
        return stamp(value)

    return utc_stamp


class _SQLiteRows:
    """The parameter tuples of the three run tables, for the driver's ``executemany``
    (SQLAlchemy's per-row parameter processing costs more than the insert itself)."""

    __slots__ = ("runs", "calls", "models", "_stamp", "_created")

    def __init__(self, stamp: Callable[[datetime], str], created: datetime) -> None:
        self._stamp = stamp
        self._created = stamp(created)
        self.runs: list[tuple[Any, ...]] = []
        self.calls: list[tuple[Any, ...]] = []
        self.models: list[tuple[Any, ...]] = []

    def add_run(self, pk: int | None, r: AnyRun) -> None:
        stamp, bools = self._stamp, _BOOL_PARAM
        started, ended = r.started_at, r.ended_at
        self.runs.append(
            (
                pk,
                r.run_id,
                r.user_id,
                r.agent_id,
                0 if r.task is None else storable_text(r.task),
                bools[r.success],
                _real(r.cost),
                r.tokens,
                len(r.tool_calls),
                len(r.model_calls),
                0 if r.classification is None else r.classification,
                0 if started is None else stamp(started),
                0 if ended is None else stamp(ended),
                self._created,
                (parsed_json_text if type(r) is RunRow else json_text)(r.meta),
                0 if r.answer is None else storable_text(r.answer),
            )
        )

    def add_calls(self, pk: int, r: AnyRun) -> None:
        user, agent, bools, nan = r.user_id, r.agent_id, _BOOL_PARAM, _NAN
        encode = parsed_json_text if type(r) is RunRow else json_text
        tool_calls, model_calls = _calls(r)
        self.calls += [
            (
                pk,
                user,
                agent,
                i,
                c.name,
                encode(c.args),
                encode(c.output),
                bools[c.error],
                nan if (d := c.duration_ms) is None or d - d != 0 else d,
                0 if c.tool_call_id is None else c.tool_call_id,
                encode(c.meta) if c.meta else "null",
            )
            for i, c in enumerate(tool_calls)
        ]
        if model_calls:
            self.models += [
                (
                    pk,
                    user,
                    agent,
                    i,
                    0 if m.model is None else m.model,
                    m.input_tokens,
                    m.output_tokens,
                    m.total_tokens,
                    _real(m.duration_ms),
                    m.tool_calls_requested,
                )
                for i, m in enumerate(model_calls)
            ]

    def insert_calls(self, cursor: Any) -> None:
        if self.calls:
            cursor.executemany(_SQLITE_INSERT_CALLS, self.calls)
        if self.models:
            cursor.executemany(_SQLITE_INSERT_MODELS, self.models)


def _database_error(exc: sqlite3.Error) -> sa.exc.StatementError:
    """The driver's error as SQLAlchemy's (``IntegrityError``...), as ``conn.execute``
    raises it: callers catch those."""
    return sa.exc.DBAPIError.instance(None, None, exc, sqlite3.Error)


def insert_sqlite(conn: Connection, fresh: Sequence[AnyRun], created: datetime) -> None:
    """SQLite: the rows of :func:`insert_returning`, through the driver's ``executemany``.

    The run pks are reserved rather than returned: the writer holds SQLite's write lock
    (``BEGIN IMMEDIATE``) from the start of the transaction, so no other connection can take
    ``max(id) + 1 ...`` before the commit, and those are the ids SQLite would assign.
    """
    rows = _SQLiteRows(sqlite_stamp(conn.dialect), created)
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        base = cursor.execute("SELECT max(id) FROM sf_task_runs").fetchone()[0] or 0
        for pk, r in enumerate(fresh, start=base + 1):
            rows.add_run(pk, r)
            rows.add_calls(pk, r)
        cursor.executemany(_SQLITE_INSERT_RUNS, rows.runs)
        rows.insert_calls(cursor)
    except sqlite3.Error as exc:
        raise _database_error(exc) from exc
    finally:
        cursor.close()


def write_one_sqlite(
    dbapi_conn: sqlite3.Connection,
    run: AnyRun,
    created: datetime,
    *,
    stamp: Callable[[datetime], str],
    then: Callable[[sqlite3.Cursor], object] | None = None,
) -> bool:
    """SQLite, one run in its own transaction, on the driver's connection (no SQLAlchemy
    connection, whose set-up costs more than the write): ``BEGIN IMMEDIATE``, one
    ``INSERT ... ON CONFLICT DO NOTHING`` (no existence query), the calls under the pk
    SQLite assigned, ``then(cursor)`` (more rows of the same transaction: the run's trace),
    ``COMMIT``. False, and nothing written, if the run id is already stored in its
    namespace."""
    rows = _SQLiteRows(stamp, created)
    rows.add_run(None, run)
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute("BEGIN IMMEDIATE")
        try:
            cursor.execute(_SQLITE_INSERT_RUN_IF_NEW, rows.runs[0])
            fresh = cursor.rowcount == 1
            if fresh:
                rows.add_calls(cursor.lastrowid, run)  # type: ignore[arg-type]
                rows.insert_calls(cursor)
                if then is not None:
                    then(cursor)
            cursor.execute("COMMIT" if fresh else "ROLLBACK")
        except BaseException:
            if dbapi_conn.in_transaction:
                dbapi_conn.rollback()
            raise
        return fresh
    except sqlite3.Error as exc:
        raise _database_error(exc) from exc
    finally:
        cursor.close()


# ---------------------------------------------------------------------- bulk rows (ingest)

BULK_REFUSED = (sqlite3.IntegrityError, sqlite3.DataError, UnicodeEncodeError)
"""What :func:`insert_sqlite_bulk` raises when the database refuses a row."""


def bulk_rows(
    ordinal: int, r: AnyRun, stamp: Callable[[datetime], str]
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of one run in :mod:`soloflow_core.ledger._rows`' layout (the line's
    ``ordinal`` first, no pk, no ``created_at``), for a run the checked path read."""
    rows = _SQLiteRows(stamp, now())
    rows.add_run(ordinal, r)
    rows.add_calls(ordinal, r)
    run = rows.runs[0]
    return run[:13] + run[14:], rows.calls, rows.models


def _bulk_sql(offset: int, created: str) -> tuple[str, str, str]:
    """The three inserts of a bulk batch: a row's pk is its ordinal plus ``offset``, the
    batch's ``created_at`` a literal (the rows carry neither)."""
    pk = f"? + {int(offset)}"
    created_at = "'" + created.replace("'", "''") + "'"
    runs = _insert_sql(t.task_runs, {**_RUN_COLUMNS, "id": pk, "created_at": created_at})
    calls = _SQLITE_INSERT_CALLS.replace("VALUES (?", f"VALUES ({pk}", 1)
    models = _SQLITE_INSERT_MODELS.replace("VALUES (?", f"VALUES ({pk}", 1)
    return runs, calls, models


def _existing_sqlite(cursor: sqlite3.Cursor, runs: Sequence[tuple[Any, ...]]) -> set[int]:
    """The ordinals of ``runs`` whose id is stored already in their namespace, or repeats
    one earlier in ``runs``."""
    by_ns: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        by_ns.setdefault((r[2], r[3]), []).append(r[1])
    stored: set[tuple[str, str, str]] = set()
    for (user, agent), ids in by_ns.items():
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" * len(part))
            sql = (
                "SELECT run_id FROM sf_task_runs WHERE user_id = ? AND agent_id = ? "
                f"AND run_id IN ({marks})"
            )
            stored.update(
                (user, agent, rid) for (rid,) in cursor.execute(sql, (user, agent, *part))
            )
    skip: set[int] = set()
    for r in runs:
        key = (r[2], r[3], r[1])
        if key in stored:
            skip.add(r[0])
        else:
            stored.add(key)
    return skip


def insert_sqlite_bulk(
    dbapi_conn: sqlite3.Connection,
    runs: list[tuple[Any, ...]],
    calls: list[tuple[Any, ...]],
    *,
    models: list[tuple[Any, ...]],
    created: str,
) -> set[int]:
    """SQLite: one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) writing the rows of
    :mod:`soloflow_core.ledger._rows`' layout, on the driver's connection. Runs whose id is
    stored already in their namespace (or repeats one earlier in ``runs``) are skipped with
    their calls; returns their ordinals.

    A run's pk is its ordinal plus ``max(id)`` less the first ordinal: the write lock is
    held from ``BEGIN IMMEDIATE``, so no other connection takes those ids meanwhile (a
    skipped run leaves its id unused). The caller turns foreign-key checks off for the
    connection: every call row points at a run row of the same statement batch.

    Raises:
        sqlite3.IntegrityError, sqlite3.DataError, UnicodeEncodeError: the database refused
            a row (see :data:`BULK_REFUSED`); nothing of the batch was written.
        sqlalchemy.exc.DBAPIError: any other database error, as SQLAlchemy words it.
    """
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute("BEGIN IMMEDIATE")
        try:
            skip = _existing_sqlite(cursor, runs)
            if skip:
                runs = [r for r in runs if r[0] not in skip]
                calls = [c for c in calls if c[0] not in skip]
                models = [m for m in models if m[0] not in skip]
            if runs:
                base = cursor.execute("SELECT max(id) FROM sf_task_runs").fetchone()[0] or 0
                sql_runs, sql_calls, sql_models = _bulk_sql(
                    base + 1 - min(r[0] for r in runs), created
                )
                cursor.executemany(sql_runs, runs)
                if calls:
                    cursor.executemany(sql_calls, calls)
                if models:
                    cursor.executemany(sql_models, models)
            cursor.execute("COMMIT")
        except BaseException:
            if dbapi_conn.in_transaction:
                dbapi_conn.rollback()
            raise
        return skip
    except BULK_REFUSED:
        raise
    except sqlite3.Error as exc:
        raise _database_error(exc) from exc
    finally:
        cursor.close()
