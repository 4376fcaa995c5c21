"""Traces: the spans of agent runs and flow runs.

``sf_spans``: one row per span (``soloflow_core.tracing.Span``) of a run, keyed by the
run's namespace, the run's id (a task run's ``run_id`` or a flow run's id) and the span's
id; ``pos`` is the order the spans started in. A new table no other revision touches.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.schema import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TS = UTCDateTime()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sf_spans",
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("run_id", sa.String(512), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("pos", sa.Integer, nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("parent_id", sa.String(16)),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("start_at", TS, nullable=False),
        sa.Column("duration_ms", sa.Float),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("attributes", JSONType, nullable=False),
        sa.PrimaryKeyConstraint("user_id", "agent_id", "run_id", "span_id", name="pk_sf_spans"),
    )


def downgrade() -> None:
    op.drop_table("sf_spans")
