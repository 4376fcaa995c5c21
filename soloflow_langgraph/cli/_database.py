"""Which database a command opens, checked before anything is created.

A command that only reads never creates a database: a mistyped ``--db`` is an error naming
the file, not a new empty database. A SQLite file is only created in a directory that
exists, and only URL schemes SoloFlow has drivers for are accepted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from soloflow_core.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    from soloflow_core.store import Store

__all__ = ["SUPPORTED_SCHEMES", "open_store", "sqlite_path"]

SUPPORTED_SCHEMES = ("sqlite", "postgresql", "postgres", "postgresql+psycopg")
_EXAMPLES = "a file path (runs.db), sqlite:///path/to/runs.db or postgresql://user@host/db"


def sqlite_path(db: str | None) -> Path | None:
    """The SQLite file ``db`` names (the embedded default when None), or None for a server
    database or an in-memory one.

    Raises:
        ConfigError: the URL's scheme is not one SoloFlow supports.
    """
    from soloflow_core.store.engine import ENV_DATABASE_URL, default_database_path, safe_url

    db = db or os.environ.get(ENV_DATABASE_URL)
    if not db:
        return default_database_path()
    if "://" not in db:
        return Path(db).expanduser()
    scheme, _, rest = db.partition("://")
    if scheme.lower() not in SUPPORTED_SCHEMES:
        raise ConfigError(
            f"--db {safe_url(db)!r}: database scheme {scheme!r} is not "
            f"supported; use {_EXAMPLES} (schemes: {', '.join(SUPPORTED_SCHEMES)})"
        )
    if scheme.lower() != "sqlite":
        return None
    path = rest[1:] if rest.startswith("/") else rest  # sqlite:///rel.db, sqlite:////abs.db
    path = path.split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file::memory:"):
        return None
    return Path(path).expanduser()


def open_store(db: str | None, *, create: bool) -> Store:
    """Open the database a command names; with ``create``, a missing SQLite file is created
    (in a directory that exists).

    Raises:
        ConfigError: an unsupported scheme, or a directory that does not exist.
        NotFoundError: a missing SQLite file for a command that only reads.
    """
    from soloflow_core.store import Store

    path = sqlite_path(db)
    if path is not None and not path.exists():
        default = not (db or os.environ.get("SOLOFLOW_DATABASE_URL"))
        if default:
            path.parent.mkdir(parents=True, exist_ok=True)  # the embedded default's home
        elif not path.parent.is_dir():
            raise ConfigError(
                f"--db {str(path)!r}: directory {str(path.parent)!r} does not exist; create it "
                f"first (mkdir -p {path.parent}) or check the path"
            )
        if not create:
            where = "database yet at the default location" if default else "database file"
            raise NotFoundError(
                f"no {where} {str(path)!r}: nothing is stored there yet. Check --db for a typo; "
                "a database is created by capturing runs (SoloFlowCallbackHandler), "
                f"`soloflow --db {path} ingest FILE` or `soloflow demo --db {path}`"
            )
    return Store.open(db)
