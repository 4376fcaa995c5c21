"""The API's bearer tokens and the skill packages imported into a namespace.

``sf_api_tokens``: one row per token of ``soloflow tokens create``: its namespace, its scope
(``read`` | ``write`` | ``admin``), a label, the SHA-256 of its secret (the token itself is
never stored) and when it was created and revoked. ``sf_skill_imports``: one row per flow
version registered by ``soloflow skills import``: the package's name and digest, the
fixtures it replayed and its provenance, so that the flow can be exported again with them.

Both are new tables that no other revision touches: this revision depends on nothing but
the tables' absence.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from soloflow_core.store.schema import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TS = UTCDateTime()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sf_api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("label", sa.String(255)),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("revoked_at", TS),
    )
    op.create_index("ix_sf_api_tokens_ns", "sf_api_tokens", ["user_id", "agent_id"])
    op.create_table(
        "sf_skill_imports",
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


def downgrade() -> None:
    op.drop_table("sf_skill_imports")
    op.drop_index("ix_sf_api_tokens_ns", table_name="sf_api_tokens")
    op.drop_table("sf_api_tokens")
