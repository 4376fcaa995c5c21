"""A step's usual begin and completion kept in its own row.

The flow runtime's usual moves of a step — its begin (none → pending → ready → running) and
its completion (running → completed) — are no longer written to ``sf_flow_transitions``: the
step's row holds each one's time and place in the run's history, in columns nothing else
writes (``begun_at``/``begun_pos``/``begun_ord``, ``done_at``/``done_pos``/``done_ord``). The
history lists them with the stored rows in order of ``(pos, ord)`` — a stored row's ``pos``
is its id and its ``ord`` 0 (see ``FlowRunRepository.flow_run_history``). On PostgreSQL ``pos`` is
a number drawn from the transitions' id sequence, ``ord`` is NULL; on SQLite ``pos`` is the
id of the run's last stored transition at the time, and ``ord`` counts the run's implied
moves. Existing rows have none: their transitions are all stored.

The downgrade writes the implied moves out as rows, numbered so that ordering by id lists
every run's history in the same order.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from soloflow_core.store.schema import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TS = UTCDateTime()
_COLUMNS = ("begun_at", "begun_pos", "begun_ord", "done_at", "done_pos", "done_ord")

_IMPLIED = (
    "SELECT run_id, step_key, NULL AS from_state, 'running' AS to_state, begun_at AS at, NULL AS detail, "
    "begun_pos AS k1, COALESCE(begun_ord, 0) AS k2 FROM sf_flow_step_runs WHERE begun_at IS NOT NULL "
    "UNION ALL SELECT run_id, step_key, 'running', 'completed', done_at, NULL, "
    "COALESCE(done_pos, completed_seq), COALESCE(done_ord, 0) FROM sf_flow_step_runs WHERE done_at IS NOT NULL"
)


def upgrade() -> None:
    with op.batch_alter_table("sf_flow_step_runs") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, TS if name.endswith("_at") else sa.Integer))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # pos is a number of the transitions' id sequence: the row's id, in order as it is.
        op.execute(
            "INSERT INTO sf_flow_transitions (id, run_id, step_key, from_state, to_state, at, detail) "
            f"SELECT k1, run_id, step_key, from_state, to_state, at, detail FROM ({_IMPLIED}) AS i"
        )
    else:
        # Renumber every transition in history order, implied moves in their places.
        op.execute(
            "CREATE TEMP TABLE sf_history AS SELECT run_id, step_key, from_state, to_state, at, detail, "
            "id AS k1, 0 AS k2, id AS k3 FROM sf_flow_transitions "
            f"UNION ALL SELECT run_id, step_key, from_state, to_state, at, detail, k1, k2, 0 FROM ({_IMPLIED})"
        )
        op.execute("DELETE FROM sf_flow_transitions")
        op.execute(
            "INSERT INTO sf_flow_transitions (id, run_id, step_key, from_state, to_state, at, detail) "
            "SELECT ROW_NUMBER() OVER (ORDER BY k1, k2, k3), run_id, step_key, from_state, to_state, at, "
            "detail FROM sf_history"
        )
        op.execute("DROP TABLE sf_history")
    with op.batch_alter_table("sf_flow_step_runs") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
