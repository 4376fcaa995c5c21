"""A step's begin and completion kept in its own row: ``sf_flow_step_runs.implied``.

The flow runtime's usual moves of a step — its begin (none → pending → ready → running) and
its completion (running → completed) — are no longer written to ``sf_flow_transitions`` as
they happen: the step's row already holds their times (``started_at``, ``finished_at``), and
``implied`` says which of the two it stands for (bit 1 the begin, bit 2 the completion).
Any other move of the step first writes them out as transition rows (and clears the bits),
so the row's times are never overwritten while a transition rests on them; the history
lists the stored and the implied transitions together, in time order
(``FlowRunStore.flow_run_history``). Existing rows keep ``implied = 0``: their transitions
are all stored.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sf_flow_step_runs") as batch:
        batch.add_column(sa.Column("implied", sa.SmallInteger, nullable=False, server_default="0"))


def downgrade() -> None:
    # Write the implied transitions out first: without the column they would be lost.
    op.execute(
        "INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, detail) "
        "SELECT run_id, step_key, NULL, 'running', started_at, NULL FROM sf_flow_step_runs "
        "WHERE (implied & 1) = 1 "
        "UNION ALL SELECT run_id, step_key, 'running', 'completed', finished_at, NULL FROM sf_flow_step_runs "
        "WHERE (implied & 2) = 2"
    )
    with op.batch_alter_table("sf_flow_step_runs") as batch:
        batch.drop_column("implied")
