"""Initial schema: task runs, tool calls, model calls, candidates, flows, flow runs.

The tables are spelled out here as they were at revision 0001 (not imported from
``schema.py``, which describes the newest revision), so later revisions can alter them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

metadata = sa.MetaData()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")
TS = UTCDateTime()

task_runs = sa.Table(
    "sf_task_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(512), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("task", sa.Text),
    sa.Column("success", sa.Boolean),
    sa.Column("cost", sa.Float),
    sa.Column("tokens", sa.Integer),
    sa.Column("tool_count", sa.Integer, nullable=False, default=0),
    sa.Column("model_call_count", sa.Integer, nullable=False, default=0),
    sa.Column("classification", sa.String(64)),
    sa.Column("started_at", TS),
    sa.Column("ended_at", TS),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("meta", JSONType),
    sa.UniqueConstraint("user_id", "agent_id", "run_id", name="uq_sf_task_runs_ns_run"),
)
sa.Index("ix_sf_task_runs_ns_id", task_runs.c.user_id, task_runs.c.agent_id, task_runs.c.id)

tool_calls = sa.Table(
    "sf_tool_calls",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "run_pk", sa.Integer, sa.ForeignKey("sf_task_runs.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("name", sa.String(512), nullable=False),
    sa.Column("args", JSONType),
    sa.Column("output", JSONType),
    sa.Column("error", sa.Boolean),
    sa.Column("duration_ms", sa.Float),
    sa.Column("tool_call_id", sa.String(255)),
    sa.Column("meta", JSONType),
)
sa.Index("ix_sf_tool_calls_run_seq", tool_calls.c.run_pk, tool_calls.c.seq)

model_calls = sa.Table(
    "sf_model_calls",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "run_pk", sa.Integer, sa.ForeignKey("sf_task_runs.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("model", sa.String(255)),
    sa.Column("input_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("output_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("total_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("duration_ms", sa.Float),
    sa.Column("tool_calls_requested", sa.Integer, nullable=False, default=0),
)
sa.Index("ix_sf_model_calls_run_seq", model_calls.c.run_pk, model_calls.c.seq)

candidates = sa.Table(
    "sf_candidates",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("dedupe_key", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("occurrence_count", sa.Integer, nullable=False),
    sa.Column("estimated_token_savings", sa.Float, nullable=False),
    sa.Column("body", JSONType, nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
    sa.UniqueConstraint("user_id", "agent_id", "dedupe_key", name="uq_sf_candidates_ns_key"),
)

flows = sa.Table(
    "sf_flows",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("name", sa.String(512), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("source", sa.String(32), nullable=False),
    sa.Column("candidate_id", sa.String(64)),
    sa.Column("definition", JSONType, nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.UniqueConstraint("user_id", "agent_id", "name", "version", name="uq_sf_flows_ns_name_ver"),
)

flow_runs = sa.Table(
    "sf_flow_runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("flow_name", sa.String(512), nullable=False),
    sa.Column("flow_version", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("inputs", JSONType),
    sa.Column("outputs", JSONType),
    sa.Column("error", sa.Text),
    sa.Column("started_at", TS, nullable=False),
    sa.Column("ended_at", TS),
)
sa.Index("ix_sf_flow_runs_ns", flow_runs.c.user_id, flow_runs.c.agent_id, flow_runs.c.started_at)


_TABLES = [task_runs, tool_calls, model_calls, candidates, flows, flow_runs]


def upgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        table.create(bind, checkfirst=False)


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(_TABLES):
        table.drop(bind, checkfirst=True)
