"""Memory tiers: episodic and semantic items, their strength, and a full-text index.

``sf_memory_items`` holds each tier's items (episodic: the ledger's events, copied lazily;
semantic: the registered flows), ``sf_memory_strength`` the forgetting curve's state of the
items that were used or archived, ``sf_memory_cursors`` the last run / flow row indexed per
namespace and tier. The full-text index of ``body`` is an FTS5 table on SQLite and a
generated ``tsvector`` column with a GIN index on PostgreSQL, spelled out here as they are
at this revision (see ``soloflow_core/store/fulltext.py``). Nothing is back-filled: the
items are built the first time a namespace's memory is searched or pruned.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.schema import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = UTCDateTime()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")

_TERMS_DDL = (
    "CREATE TABLE sf_memory_items_terms (ns VARCHAR(64) NOT NULL, "
    "term VARCHAR(64) NOT NULL, df INTEGER NOT NULL, PRIMARY KEY (ns, term))"
)
_SQLITE_DDL = [
    "CREATE VIRTUAL TABLE sf_memory_items_fts USING fts5("
    "ns, body, tokenize = 'unicode61 remove_diacritics 0')",
    _TERMS_DDL,
]
_POSTGRES_DDL = [
    "ALTER TABLE sf_memory_items ADD COLUMN body_tsv tsvector GENERATED ALWAYS "
    "AS (to_tsvector('simple'::regconfig, coalesce(body, ''))) STORED",
    "CREATE INDEX ix_sf_memory_items_body_tsv ON sf_memory_items USING gin (body_tsv)",
    _TERMS_DDL,
]


def upgrade() -> None:
    op.create_table(
        "sf_memory_items",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("item_key", sa.String(300), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("sf_task_runs.id", ondelete="CASCADE")),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("data", JSONType),
        sa.Column("at", TS, nullable=False),
        sa.UniqueConstraint(
            "user_id", "agent_id", "tier", "item_key", name="uq_sf_memory_items_ns_key"
        ),
    )
    op.create_index("ix_sf_memory_items_run_pk", "sf_memory_items", ["run_pk"])
    op.create_index(
        "ix_sf_memory_items_ns_at", "sf_memory_items", ["user_id", "agent_id", "tier", "at"]
    )
    op.create_table(
        "sf_memory_strength",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("agent_id", sa.String(255), primary_key=True),
        sa.Column("tier", sa.String(16), primary_key=True),
        sa.Column("item_key", sa.String(300), primary_key=True),
        sa.Column("base", sa.Float, nullable=False),
        sa.Column("stability", sa.Float, nullable=False),
        sa.Column("last_used", TS, nullable=False),
        sa.Column("uses", sa.Integer, nullable=False),
        sa.Column("archived_at", TS),
    )
    op.create_table(
        "sf_memory_cursors",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("agent_id", sa.String(255), primary_key=True),
        sa.Column("tier", sa.String(16), primary_key=True),
        sa.Column("last_pk", sa.Integer, nullable=False),
    )
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in _SQLITE_DDL if sqlite else _POSTGRES_DDL:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS sf_memory_items_terms")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS sf_memory_items_fts")
    op.drop_table("sf_memory_cursors")
    op.drop_table("sf_memory_strength")
    op.drop_index("ix_sf_memory_items_ns_at", table_name="sf_memory_items")
    op.drop_index("ix_sf_memory_items_run_pk", table_name="sf_memory_items")
    op.drop_table("sf_memory_items")
