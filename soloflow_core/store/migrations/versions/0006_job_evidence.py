"""The agent's final answer of each run, and the task texts each flow's job is known by.

``sf_task_runs.answer`` holds the text of the agent's last message (learned reply templates
are built from it). ``sf_flow_evidence`` holds, per flow name, the task texts of the runs the
flow was learned from and of later agent runs of its sequence: what routing compares a
request with (see ``docs/agents.md``, "Routing"). Existing learned flows get the task texts
of their candidate's runs.

The full-text tokenizer now stems words (``orders`` → ``order``): the flows' and the memory
items' indexed text is rewritten with it (with the tokenizer of this release: a data
migration, run once).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from soloflow_core.store.fulltext import namespace_token, stem
from soloflow_core.store.memory_index import ITEM_SEARCH
from soloflow_core.store.procedural import reindex_flow_rows
from soloflow_core.store.schema import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TS = UTCDateTime()
_FROM_CANDIDATES = 200
"""Runs of a learned flow's candidate copied as its evidence (the newest first)."""


def upgrade() -> None:
    with op.batch_alter_table("sf_task_runs") as batch:
        batch.add_column(sa.Column("answer", sa.Text))
    op.create_table(
        "sf_flow_evidence",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("flow_name", sa.String(512), nullable=False),
        sa.Column("run_id", sa.String(512), nullable=False),
        sa.Column("task", sa.Text, nullable=False),
        sa.Column("source", sa.String(24), nullable=False),
        sa.Column("added_at", TS, nullable=False),
        sa.UniqueConstraint(
            "user_id", "agent_id", "flow_name", "run_id", name="uq_sf_flow_evidence"
        ),
    )
    _copy_candidate_tasks()
    bind = op.get_bind()
    reindex_flow_rows(bind)
    _restem_memory_items(bind)


def _restem_memory_items(bind: sa.engine.Connection) -> None:
    """Memory items hold their text as terms: stem each term where it stands."""
    rows = bind.execute(
        sa.text("SELECT id, user_id, agent_id, tier, body FROM sf_memory_items")
    ).all()
    indexed = []
    for pk, user, agent, tier, body in rows:
        text = " ".join(stem(term) for term in (body or "").split())
        if text != body:
            bind.execute(
                sa.text("UPDATE sf_memory_items SET body = :b WHERE id = :i"), {"b": text, "i": pk}
            )
        indexed.append((pk, namespace_token(user, agent, tier), text))
    ITEM_SEARCH.rebuild(bind, indexed)


def _copy_candidate_tasks() -> None:
    bind = op.get_bind()
    flows = bind.execute(
        sa.text(
            "SELECT DISTINCT f.user_id, f.agent_id, f.name, c.body FROM sf_flows AS f "
            "JOIN sf_candidates AS c ON c.id = f.candidate_id AND c.user_id = f.user_id "
            "AND c.agent_id = f.agent_id WHERE f.is_latest"
        )
    ).all()
    now = datetime.now(UTC)
    for user, agent, name, body in flows:
        if isinstance(body, str):
            body = json.loads(body)
        run_ids = [r for r in (body or {}).get("run_ids") or [] if isinstance(r, str)]
        run_ids = run_ids[-_FROM_CANDIDATES:]
        if not run_ids:
            continue
        runs = bind.execute(
            sa.text(
                "SELECT run_id, task FROM sf_task_runs WHERE user_id = :u AND agent_id = :a "
                "AND run_id IN :ids"
            ).bindparams(sa.bindparam("ids", expanding=True)),
            {"u": user, "a": agent, "ids": run_ids},
        ).all()
        rows = [
            {
                "user_id": user,
                "agent_id": agent,
                "flow_name": name,
                "run_id": rid,
                "task": task,
                "source": "learned",
                "added_at": now,
            }
            for rid, task in runs
            if task
        ]
        if rows:
            bind.execute(
                sa.text(
                    "INSERT INTO sf_flow_evidence (user_id, agent_id, flow_name, run_id, task, source, "
                    "added_at) VALUES (:user_id, :agent_id, :flow_name, :run_id, :task, :source, "
                    ":added_at)"
                ),
                rows,
            )


def downgrade() -> None:
    op.drop_table("sf_flow_evidence")
    with op.batch_alter_table("sf_task_runs") as batch:
        batch.drop_column("answer")
