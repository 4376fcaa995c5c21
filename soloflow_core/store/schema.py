"""The store's tables (private to :mod:`soloflow_core.store`).

Every row that belongs to someone carries ``user_id`` and ``agent_id``.
Bump ``SCHEMA_REVISION`` together with a new Alembic revision in ``migrations/versions``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA_REVISION = "0009"


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timestamp stored in UTC and read back timezone-aware, in UTC, on every dialect.

    SQLite has no timestamp type: SQLAlchemy writes the wall time and drops the offset,
    so ``12:00+02:00`` would come back as a naive ``12:00``. Converting to UTC on the way
    in and attaching UTC on the way out keeps the instant. A naive value is taken as UTC.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


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
    sa.Column("answer", sa.Text),
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
    # 0003: procedural memory (soloflow_core.store.procedural). Each row is one version; the
    # version in use has is_latest. On PostgreSQL the migration also adds search_text_tsv, a
    # stored generated tsvector with a GIN index; on SQLite the FTS5 table sf_flows_fts holds
    # the latest versions' search_text (see soloflow_core.store.fulltext). Neither is here:
    # the store reads them through FullTextIndex.
    sa.Column("is_latest", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("status", sa.String(24), nullable=False, server_default="active"),
    sa.Column("confidence", sa.Float, nullable=False, server_default="0.5"),
    sa.Column("success_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("total_executions", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_used", TS),
    sa.Column("trigger_keywords", JSONType),
    sa.Column("skill_keys", JSONType),
    sa.Column("search_text", sa.Text),
    sa.Column("learning", JSONType),
)
sa.Index("ix_sf_flows_ns_latest", flows.c.user_id, flows.c.agent_id, flows.c.is_latest)

flow_evidence = sa.Table(
    # 0006: the task texts a flow's job is known by (soloflow_core.memory.intent): those of the
    # runs it was learned from and of later agent runs of its sequence. Keyed by the flow's
    # name: the job outlives its versions.
    "sf_flow_evidence",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("flow_name", sa.String(512), nullable=False),
    sa.Column("run_id", sa.String(512), nullable=False),
    sa.Column("task", sa.Text, nullable=False),
    sa.Column("source", sa.String(24), nullable=False),
    sa.Column("added_at", TS, nullable=False),
    sa.UniqueConstraint("user_id", "agent_id", "flow_name", "run_id", name="uq_sf_flow_evidence"),
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
    # 0002: the flow runtime
    sa.Column("owner", sa.String(255)),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("updated_at", TS),
    sa.Column("outcome", sa.String(32)),
    sa.Column("definition", JSONType),
)
sa.Index("ix_sf_flow_runs_ns", flow_runs.c.user_id, flow_runs.c.agent_id, flow_runs.c.started_at)

flow_step_runs = sa.Table(
    "sf_flow_step_runs",
    metadata,
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
    # 0005: the step's usual begin and completion, kept here instead of as rows of
    # sf_flow_transitions: each one's time and place in the run's history (pos, ord), in
    # columns no other move writes (see migration 0005 and flowruns.flow_run_history)
    sa.Column("begun_at", TS),
    sa.Column("begun_pos", sa.Integer),
    sa.Column("begun_ord", sa.Integer),
    sa.Column("done_at", TS),
    sa.Column("done_pos", sa.Integer),
    sa.Column("done_ord", sa.Integer),
)

flow_transitions = sa.Table(
    "sf_flow_transitions",
    metadata,
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
sa.Index("ix_sf_flow_transitions_run", flow_transitions.c.run_id, flow_transitions.c.id)

# 0004: memory tiers (soloflow_core.store.memory_items). Episodic items are the ledger's
# events (a run's task, its tool calls), copied here lazily, never on the ingest path; semantic
# items are the registered flows. The full-text index of ``body`` (the FTS5 table
# sf_memory_items_fts on SQLite, the generated column body_tsv with a GIN index on PostgreSQL,
# and sf_memory_items_terms) is created by the migration and read through FullTextIndex.
memory_items = sa.Table(
    "sf_memory_items",
    metadata,
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
sa.Index("ix_sf_memory_items_run_pk", memory_items.c.run_pk)
sa.Index(
    "ix_sf_memory_items_ns_at",
    memory_items.c.user_id,
    memory_items.c.agent_id,
    memory_items.c.tier,
    memory_items.c.at,
)

memory_strength = sa.Table(
    "sf_memory_strength",
    metadata,
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

memory_cursors = sa.Table(
    "sf_memory_cursors",
    metadata,
    sa.Column("user_id", sa.String(255), primary_key=True),
    sa.Column("agent_id", sa.String(255), primary_key=True),
    sa.Column("tier", sa.String(16), primary_key=True),
    sa.Column("last_pk", sa.Integer, nullable=False),
)

# 0007: the API's bearer tokens (soloflow_core.store.tokens) and the skill packages imported
# into a namespace (soloflow_core.store.skills). A token is stored as the SHA-256 of its
# secret, never in clear; ``id`` is its public part (the token reads ``sft_<id>_<secret>``).
api_tokens = sa.Table(
    "sf_api_tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("label", sa.String(255)),
    sa.Column("secret_hash", sa.String(64), nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("revoked_at", TS),
)
sa.Index("ix_sf_api_tokens_ns", api_tokens.c.user_id, api_tokens.c.agent_id)

skill_imports = sa.Table(
    "sf_skill_imports",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("agent_id", sa.String(255), nullable=False),
    sa.Column("flow_name", sa.String(512), nullable=False),
    sa.Column("flow_version", sa.Integer, nullable=False),
    sa.Column("skill_name", sa.String(64), nullable=False),
    sa.Column("package_digest", sa.String(64), nullable=False),
    sa.Column("fixtures", JSONType, nullable=False),
    sa.Column("provenance", JSONType, nullable=False),
    sa.Column("imported_at", TS, nullable=False),
    sa.UniqueConstraint(
        "user_id", "agent_id", "flow_name", "flow_version", name="uq_sf_skill_imports_ns_flow"
    ),
)

# 0008: traces (soloflow_core.store.traces): the spans of an agent run or a flow run, keyed by
# the run's id; ``pos`` keeps the order they started in. 0009: ``descendants``, the spans under
# a row's span packed in one JSON text (``soloflow_core.store.packed_spans``): an agent run's
# trace is one row.
spans = sa.Table(
    "sf_spans",
    metadata,
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
    sa.Column("descendants", sa.Text),
    sa.PrimaryKeyConstraint("user_id", "agent_id", "run_id", "span_id", name="pk_sf_spans"),
)
