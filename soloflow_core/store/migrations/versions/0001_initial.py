"""Initial schema: task runs, tool calls, model calls, candidates, flows, flow runs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

from soloflow_core.store import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TABLES = [
    schema.task_runs,
    schema.tool_calls,
    schema.model_calls,
    schema.candidates,
    schema.flows,
    schema.flow_runs,
]


def upgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        table.create(bind, checkfirst=False)


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(_TABLES):
        table.drop(bind, checkfirst=True)
