"""A registered flow's record changed through the driver: on PostgreSQL
(:func:`change_flow_record_pg`) the locked read and the write in two round trips, where
SQLAlchemy's transaction on the main pool takes five (pre-ping, ``BEGIN``, read, write,
``COMMIT``); on SQLite (:func:`change_flow_record_sqlite`) in one ``BEGIN IMMEDIATE``
transaction on the journal's writing connection, without SQLAlchemy's statement layer and a
pool checkout. Used by :meth:`~soloflow_core.store.flows.FlowRepository.change_flow_record`,
which documents what it does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError
from soloflow_core.store.journal_io import (
    DURABLE_BEGIN,
    JournalSql,
    driver_transaction,
    durable_transaction,
    stamper,
)
from soloflow_core.store.json_values import json_text
from soloflow_core.store.procedural import (
    FlowMeta,
    check_confidence,
    check_status,
    flow_meta,
    written_meta,
)

if TYPE_CHECKING:
    from soloflow_core.store.database import Database

WRITABLE = frozenset(
    {"success_count", "total_executions", "confidence", "status", "learning", "last_used"}
)
"""The columns a change may write."""

_PG_LOCK = (
    "SELECT name, version, source, status, confidence, success_count, total_executions, "
    "trigger_keywords, skill_keys, is_latest, created_at, last_used, candidate_id, learning, id "
    "FROM sf_flows WHERE user_id = %s AND agent_id = %s AND name = %s AND is_latest FOR UPDATE"
)
"""The latest version's record (``META_COLUMNS``), its ``learning`` and its row id, locked."""


def checked_values(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` if a change may write them, else an error."""
    unknown = set(values) - WRITABLE
    if unknown:
        raise ValueError(f"change_flow_record cannot set {', '.join(sorted(unknown))}")
    if "confidence" in values:
        check_confidence(values["confidence"])
    if "status" in values:
        check_status(values["status"])
    return values


def change_flow_record_pg(
    db: Database,
    name: str,
    *,
    user_id: str,
    agent_id: str,
    change: Callable[[FlowMeta, dict[str, Any] | None], dict[str, Any]],
) -> FlowMeta:
    """PostgreSQL: ``change_flow_record`` in one durably committed transaction on ``db``
    (the journal's pool): ``BEGIN`` and the locked read in one pipeline, the write and
    ``COMMIT`` in another."""

    def work(conn: Any, cur: Any) -> FlowMeta:
        with conn.pipeline():
            for statement in DURABLE_BEGIN:
                conn.execute(statement)
            cur.execute(_PG_LOCK, (user_id, agent_id, name))
        row = cur.fetchone()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r} for user {user_id!r}, agent {agent_id!r}; "
                "list flows with `soloflow flows list`"
            )
        row = (*row[:10], _utc(row[10]), _utc(row[11]), *row[12:])
        meta = flow_meta(row)
        learning = row[13] if isinstance(row[13], dict) else None
        values = checked_values(change(meta, learning))
        if values:
            sets = ", ".join(
                f"{k} = CAST(%s AS jsonb)" if k == "learning" else f"{k} = %s" for k in values
            )
            params = [json_text(v) if k == "learning" else _bound(v) for k, v in values.items()]
            with conn.pipeline():
                cur.execute(f"UPDATE sf_flows SET {sets} WHERE id = %s", (*params, row[14]))
                conn.execute("COMMIT")
        else:
            conn.execute("COMMIT")
        return written_meta(meta, values)

    return durable_transaction(db, work)  # type: ignore[no-any-return]


def change_flow_record_sqlite(
    db: Database,
    name: str,
    *,
    user_id: str,
    agent_id: str,
    change: Callable[[FlowMeta, dict[str, Any] | None], dict[str, Any]],
) -> FlowMeta:
    """SQLite: ``change_flow_record`` in one ``BEGIN IMMEDIATE`` transaction on the journal's
    writing connection (:func:`~soloflow_core.store.journal_io.driver_transaction`)."""
    stamp = stamper(db.engine)

    def work(cur: Any) -> FlowMeta:
        cur.execute(_SQLITE_READ, (user_id, agent_id, name))
        got = cur.fetchone()
        if got is None:
            raise NotFoundError(
                f"no flow {name!r} for user {user_id!r}, agent {agent_id!r}; "
                "list flows with `soloflow flows list`"
            )
        row = (
            *got[:7],
            _json(got[7]),
            _json(got[8]),
            bool(got[9]),
            _stored_time(got[10]),
            _stored_time(got[11]),
            got[12],
            _json(got[13]),
            got[14],
        )
        meta = flow_meta(row)
        learning = row[13] if isinstance(row[13], dict) else None
        values = checked_values(change(meta, learning))
        if values:
            sets = ", ".join(f"{k} = ?" for k in values)
            params = [_sqlite_value(k, v, stamp) for k, v in values.items()]
            cur.execute(f"UPDATE sf_flows SET {sets} WHERE id = ?", (*params, row[14]))
        return written_meta(meta, values)

    return driver_transaction(db, JournalSql.build("sqlite"), work)  # type: ignore[no-any-return]


_SQLITE_READ = _PG_LOCK.removesuffix(" FOR UPDATE").replace("%s", "?")
"""The latest version's record, its ``learning`` and its row id (locked by ``BEGIN
IMMEDIATE``)."""


def _json(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else text


def _stored_time(text: Any) -> datetime | None:
    """A time as SQLite stores it (SQLAlchemy's text, in UTC), timezone-aware."""
    if text is None or isinstance(text, datetime):
        return _utc(text)
    return _utc(datetime.fromisoformat(text))


def _sqlite_value(column: str, value: Any, stamp: Callable[[datetime], Any]) -> Any:
    if column == "learning":
        return json_text(value)
    if isinstance(value, datetime):
        return stamp(value)
    return value


def _utc(value: datetime | None) -> datetime | None:
    """A time as the store reads it back: timezone-aware, in UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _bound(value: Any) -> Any:
    """A value as the store writes it: a naive time taken as UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value
