"""Procedural memory: each flow version's record, trigger keywords, and a full-text index.

``sf_flows`` gains the latest-version flag, status, confidence, execution counts, last use,
trigger keywords, tools, the indexed text and the outcome rules' state. The full-text index
is an FTS5 table on SQLite and a generated ``tsvector`` column with a GIN index on
PostgreSQL (see ``soloflow_core/store/fulltext.py``), both spelled out here as they are at
this revision. Existing flows are back-filled: their latest version is flagged, keywords are
derived from the definition and indexed (with the tokenizer of ``fulltext``; the store's
``reindex_flows`` recomputes them with the current code).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import hashlib
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.fulltext import index_text, phrase_terms, words
from soloflow_core.store.schema import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TS = UTCDateTime()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")

_TERMS_DDL = (
    "CREATE TABLE sf_flows_terms (ns VARCHAR(64) NOT NULL, term VARCHAR(64) NOT NULL, "
    "df INTEGER NOT NULL, PRIMARY KEY (ns, term))"
)
_SQLITE_DDL = [
    "CREATE VIRTUAL TABLE sf_flows_fts USING fts5("
    "ns, body, tokenize = 'unicode61 remove_diacritics 0')",
    _TERMS_DDL,
]
_POSTGRES_DDL = [
    "ALTER TABLE sf_flows ADD COLUMN search_text_tsv tsvector GENERATED ALWAYS "
    "AS (to_tsvector('simple'::regconfig, coalesce(search_text, ''))) STORED",
    "CREATE INDEX ix_sf_flows_search_text_tsv ON sf_flows USING gin (search_text_tsv)",
    _TERMS_DDL,
]
_BOILERPLATE = {"auto", "generated", "observed", "repetitions", "flow", "offload", "notes"}
_BOILERPLATE_TAGS = {"auto-generated", "flow-offload"}


def upgrade() -> None:
    with op.batch_alter_table("sf_flows") as batch:
        batch.add_column(
            sa.Column("is_latest", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(
            sa.Column("status", sa.String(24), nullable=False, server_default="active")
        )
        batch.add_column(sa.Column("confidence", sa.Float, nullable=False, server_default="0.5"))
        batch.add_column(sa.Column("success_count", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(
            sa.Column("total_executions", sa.Integer, nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("last_used", TS))
        batch.add_column(sa.Column("trigger_keywords", JSONType))
        batch.add_column(sa.Column("skill_keys", JSONType))
        batch.add_column(sa.Column("search_text", sa.Text))
        batch.add_column(sa.Column("learning", JSONType))
    op.create_index("ix_sf_flows_ns_latest", "sf_flows", ["user_id", "agent_id", "is_latest"])
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in _SQLITE_DDL if sqlite else _POSTGRES_DDL:
        op.execute(statement)
    _backfill(op.get_bind(), sqlite)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS sf_flows_terms")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS sf_flows_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_sf_flows_search_text_tsv")
        op.execute("ALTER TABLE sf_flows DROP COLUMN IF EXISTS search_text_tsv")
    op.drop_index("ix_sf_flows_ns_latest", table_name="sf_flows")
    with op.batch_alter_table("sf_flows") as batch:
        for name in (
            "learning",
            "search_text",
            "skill_keys",
            "trigger_keywords",
            "last_used",
            "total_executions",
            "success_count",
            "confidence",
            "status",
            "is_latest",
        ):
            batch.drop_column(name)


# ---------------------------------------------------------------------- back-fill

_flows = sa.table(
    "sf_flows",
    sa.column("id", sa.Integer),
    sa.column("user_id", sa.String),
    sa.column("agent_id", sa.String),
    sa.column("name", sa.String),
    sa.column("version", sa.Integer),
    sa.column("source", sa.String),
    sa.column("definition", JSONType),
    sa.column("is_latest", sa.Boolean),
    sa.column("confidence", sa.Float),
    sa.column("trigger_keywords", JSONType),
    sa.column("skill_keys", JSONType),
    sa.column("search_text", sa.Text),
)


def _keywords(d: dict[str, Any]) -> list[str]:
    steps = d.get("steps") or []
    tags = [str(x).strip() for x in d.get("tags") or [] if str(x).strip() not in _BOILERPLATE_TAGS]
    texts = [d.get("name") or "", d.get("description") or ""]
    texts += [s.get("name") or "" for s in steps] + [s.get("skill_key") or "" for s in steps]
    found = [
        w
        for w in dict.fromkeys(w for x in texts for w in words(x))
        if w not in _BOILERPLATE and not w.isdigit()
    ]
    seen: set[tuple[str, ...]] = set()
    out = []
    for k in [*tags, *found]:
        key = tuple(sorted(phrase_terms(k)))
        if k and key and key not in seen:
            seen.add(key)
            out.append(k)
    return out[:24]


def _search_text(d: dict[str, Any], keywords: list[str]) -> str:
    steps = d.get("steps") or []
    parts = [*keywords, d.get("name") or "", d.get("description") or "", *(d.get("tags") or [])]
    parts += [f"{s.get('name') or ''} {s.get('skill_key') or ''}" for s in steps]
    return index_text(parts)


def _backfill(conn: sa.Connection, sqlite: bool) -> None:
    rows = conn.execute(
        sa.select(
            _flows.c.id,
            _flows.c.user_id,
            _flows.c.agent_id,
            _flows.c.name,
            _flows.c.version,
            _flows.c.source,
            _flows.c.definition,
        )
    ).all()
    latest: dict[tuple[str, str, str], tuple[int, int]] = {}
    for pk, user, agent, name, version, _, _ in rows:
        key = (user, agent, name)
        if key not in latest or version > latest[key][1]:
            latest[key] = (pk, version)
    latest_ids = {pk for pk, _ in latest.values()}
    df: dict[tuple[str, str], int] = {}
    for pk, user, agent, _, _, source, definition in rows:
        d = definition if isinstance(definition, dict) else {}
        keywords = _keywords(d)
        text = _search_text(d, keywords)
        steps = d.get("steps") or []
        keys = [s.get("skill_key") for s in steps]
        keys += [(s.get("compensation") or {}).get("skill_key") for s in steps]
        skills = list(dict.fromkeys(k for k in keys if k))
        conn.execute(
            sa.update(_flows)
            .where(_flows.c.id == pk)
            .values(
                is_latest=pk in latest_ids,
                confidence=1.0 if source == "user-submitted" else 0.5,
                trigger_keywords=keywords,
                skill_keys=skills,
                search_text=text,
            )
        )
        if pk not in latest_ids:
            continue
        digest = hashlib.sha256(f"{user}\x1f{agent}".encode("utf-8", "surrogatepass")).hexdigest()
        ns = "ns" + digest[:24]
        if sqlite:
            conn.exec_driver_sql(
                "INSERT INTO sf_flows_fts (rowid, ns, body) VALUES (?, ?, ?)", (pk, ns, text)
            )
        for term in {"", *(w for w in text.split() if len(w) <= 64)}:
            df[ns, term] = df.get((ns, term), 0) + 1
    if df:
        conn.execute(
            sa.text("INSERT INTO sf_flows_terms (ns, term, df) VALUES (:ns, :term, :df)"),
            [{"ns": ns, "term": term, "df": n} for (ns, term), n in df.items()],
        )
