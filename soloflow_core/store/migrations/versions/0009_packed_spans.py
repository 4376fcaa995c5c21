"""A run's spans in one row: ``sf_spans.descendants``.

A captured agent run's trace is kept as its root span's row, the spans under it packed in
that row's new ``descendants`` column, one JSON text (``soloflow_core.store.packed_spans``).
Traces kept before (one row per span, ``descendants`` null) read back as they were; nothing is
rewritten. The downgrade writes each packed span out as a row of its own.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.packed_spans import unpack_descendants
from soloflow_core.store.schema import UTCDateTime
from soloflow_core.tracing.spans import Span

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TS = UTCDateTime()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sf_spans") as batch:
        batch.add_column(sa.Column("descendants", sa.Text))


def downgrade() -> None:
    _unpack_rows(op.get_bind())
    with op.batch_alter_table("sf_spans") as batch:
        batch.drop_column("descendants")


def _unpack_rows(bind: sa.engine.Connection) -> None:
    """Every packed span as a row of its own, right after its root (later rows move down)."""
    spans = sa.table(
        "sf_spans",
        sa.column("user_id"),
        sa.column("agent_id"),
        sa.column("run_id"),
        sa.column("span_id"),
        sa.column("pos", sa.Integer),
        sa.column("trace_id"),
        sa.column("start_at", TS),
        sa.column("descendants", sa.Text),
        sa.column("parent_id"),
        sa.column("name"),
        sa.column("kind"),
        sa.column("duration_ms", sa.Float),
        sa.column("status"),
        sa.column("error"),
        sa.column("attributes", JSONType),
    )
    c = spans.c
    packed = bind.execute(
        sa.select(
            c.user_id, c.agent_id, c.run_id, c.span_id, c.pos, c.trace_id, c.start_at, c.descendants
        ).where(c.descendants.is_not(None))
    ).all()
    for r in packed:
        root = Span(
            trace_id=r.trace_id, id=r.span_id, parent=None, name="", kind="chat", start=r.start_at
        )
        under = unpack_descendants(root, r.descendants)
        run = (c.user_id == r.user_id, c.agent_id == r.agent_id, c.run_id == r.run_id)
        later = bind.execute(
            sa.select(c.span_id, c.pos).where(*run, c.pos > r.pos).order_by(c.pos.desc())
        ).all()
        for span_id, pos in later:  # from the last, so that no two rows share a position
            bind.execute(
                sa.update(spans).where(*run, c.span_id == span_id).values(pos=pos + len(under))
            )
        for n, s in enumerate(under, start=1):
            bind.execute(
                sa.insert(spans).values(
                    user_id=r.user_id,
                    agent_id=r.agent_id,
                    run_id=r.run_id,
                    span_id=s.id,
                    pos=r.pos + n,
                    trace_id=s.trace_id,
                    parent_id=s.parent,
                    name=s.name,
                    kind=s.kind,
                    start_at=s.start,
                    duration_ms=s.duration_ms,
                    status=s.status,
                    error=s.error,
                    attributes=s.attributes,
                )
            )
        bind.execute(sa.update(spans).where(*run, c.span_id == r.span_id).values(descendants=None))
