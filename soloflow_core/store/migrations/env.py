"""Alembic environment: SoloFlow runs migrations on a connection it hands in."""

from __future__ import annotations

from alembic import context

from soloflow_core.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only through `alembic` CLI with a URL
    from sqlalchemy import create_engine

    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    connection = engine.connect()

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    version_table="sf_alembic_version",
)
with context.begin_transaction():
    context.run_migrations()
