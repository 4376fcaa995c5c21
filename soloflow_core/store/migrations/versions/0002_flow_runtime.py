"""The flow runtime: run ownership and cancellation, the definition each run ran, per-step state,
recorded transitions.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.schema import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = UTCDateTime()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sf_flow_runs") as batch:
        batch.add_column(sa.Column("owner", sa.String(255)))
        batch.add_column(
            sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("updated_at", TS))
        batch.add_column(sa.Column("outcome", sa.String(32)))
        batch.add_column(sa.Column("definition", JSONType))
    op.create_table(
        "sf_flow_step_runs",
        sa.Column(
            "run_id",
            sa.String(64),
            sa.ForeignKey("sf_flow_runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("step_key", sa.String(300), primary_key=True),
        sa.Column("step_id", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("idempotency_key", sa.String(400), nullable=False),
        sa.Column("output", JSONType),
        sa.Column("error", sa.Text),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS),
        sa.Column("completed_seq", sa.Integer),
    )
    op.create_table(
        "sf_flow_transitions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "run_id",
            sa.String(64),
            sa.ForeignKey("sf_flow_runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("step_key", sa.String(300)),
        sa.Column("from_state", sa.String(16)),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("detail", sa.Text),
    )
    op.create_index("ix_sf_flow_transitions_run", "sf_flow_transitions", ["run_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_sf_flow_transitions_run", table_name="sf_flow_transitions")
    op.drop_table("sf_flow_transitions")
    op.drop_table("sf_flow_step_runs")
    with op.batch_alter_table("sf_flow_runs") as batch:
        for name in ("definition", "outcome", "updated_at", "cancel_requested", "owner"):
            batch.drop_column(name)
