"""SoloFlow's store: SQLite (WAL) embedded, PostgreSQL by URL; same code."""

from soloflow_core.store.engine import default_database_path, resolve_database_url
from soloflow_core.store.repository import (
    FlowRecord,
    RunSequence,
    RunSummary,
    Store,
    ToolNameColumns,
)

__all__ = [
    "FlowRecord",
    "RunSequence",
    "ToolNameColumns",
    "RunSummary",
    "Store",
    "default_database_path",
    "resolve_database_url",
]
