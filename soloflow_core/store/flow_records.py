"""A registered flow's record changed on PostgreSQL through the driver
(:func:`change_flow_record_pg`): the locked read and the write in two round trips, where
SQLAlchemy's transaction on the main pool takes five (pre-ping, ``BEGIN``, read, write,
``COMMIT``). Used by :meth:`~soloflow_core.store.flows.FlowRepository.change_flow_record`,
which documents what it does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError
from soloflow_core.store.journal_io import DURABLE_BEGIN, durable_transaction
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
