"""Where the database is and how its engine is set up: URL resolution, settings per dialect.

:class:`~soloflow_core.store.database.Database` opens it (and migrates the schema).
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from soloflow_core.errors import StoreError

ENV_DATABASE_URL = "SOLOFLOW_DATABASE_URL"
ENV_HOME = "SOLOFLOW_HOME"
WRITE_OPTION = "soloflow_write"


def default_database_path() -> Path:
    """Where the embedded database lives when no URL is given.

    ``$SOLOFLOW_HOME/soloflow.db`` if set, else ``$XDG_DATA_HOME/soloflow/soloflow.db``,
    else ``~/.local/share/soloflow/soloflow.db``.
    """
    if os.environ.get(ENV_HOME):
        return Path(os.environ[ENV_HOME]).expanduser() / "soloflow.db"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "soloflow" / "soloflow.db"


def resolve_database_url(url: str | None = None) -> str:
    """``url`` if given, else ``$SOLOFLOW_DATABASE_URL``, else the embedded SQLite file.

    A bare path is taken as a SQLite file; ``postgresql://`` selects the psycopg 3 driver.
    """
    url = url or os.environ.get(ENV_DATABASE_URL)
    if not url:
        path = default_database_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"
    if "://" not in url:
        path = Path(url).expanduser()
        if path.parent and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


SYNCHRONOUS_ENV = "SOLOFLOW_SQLITE_SYNCHRONOUS"
_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")


def _synchronous() -> str:
    value = os.environ.get(SYNCHRONOUS_ENV, "NORMAL").strip().upper()
    if value not in _SYNCHRONOUS:
        raise StoreError(
            f"{SYNCHRONOUS_ENV}={value!r}: expected one of {', '.join(_SYNCHRONOUS)} "
            "(NORMAL: survives a process crash; FULL: also a power loss, an fsync per commit)"
        )
    return value


def _sqlite_engine(url: str) -> Engine:
    synchronous = _synchronous()
    engine = sa.create_engine(
        url, connect_args={"check_same_thread": False, "timeout": 30.0}, pool_pre_ping=False
    )

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        # Take transaction control from pysqlite so that writes can BEGIN IMMEDIATE.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if ":memory:" not in url and url != "sqlite://":
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn):  # type: ignore[no-untyped-def]
        # A writer takes the write lock up front: no deadlock-prone lock upgrade later.
        conn.exec_driver_sql(
            "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN"
        )

    return engine


def create_store_engine(url: str) -> Engine:
    """An engine configured for SoloFlow's access pattern on the URL's dialect.

    SQLite files run in WAL mode with ``synchronous=NORMAL``: a commit has written its pages
    to the WAL file when it returns, so it survives the process exiting or being killed right
    after; it is not fsynced, so an operating-system crash or a power loss may lose the
    transactions since the last checkpoint (without corrupting the database). Set
    ``SOLOFLOW_SQLITE_SYNCHRONOUS=FULL`` to fsync every commit (power-loss durable, a few
    hundred microseconds to milliseconds more per commit, disk permitting).
    """
    try:
        if url.startswith("sqlite"):
            return _sqlite_engine(url)
        return sa.create_engine(url, pool_pre_ping=True)
    except (ImportError, sa.exc.ArgumentError) as exc:
        hint = ""
        if url.startswith("postgresql"):
            hint = " Install the PostgreSQL extra: pip install 'soloflow-engine[postgres]'."
        raise StoreError(f"cannot open database {safe_url(url)!r}: {exc}.{hint}") from exc


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def open_failure(url: str, exc: sa.exc.SQLAlchemyError) -> str:
    """Why the database at ``url`` could not be opened, in the driver's words without
    SQLAlchemy's wrapping, and how to fix it."""
    orig = getattr(exc, "orig", None)
    reason = " ".join(str(orig if orig is not None else exc).split())
    reason = reason.split(" (Background on this error at:", 1)[0]
    hint = ""
    try:
        parts = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        parts = None
    if parts is not None and parts.get_backend_name() == "postgresql":
        host = f"{parts.host or 'localhost'}:{parts.port or 5432}"
        if "does not exist" in reason and f'database "{parts.database}"' in reason:
            hint = (
                f"; create it first: createdb -h {parts.host or 'localhost'} -p "
                f"{parts.port or 5432} -U {parts.username or 'postgres'} {parts.database} "
                f"(or CREATE DATABASE {parts.database}), or check the database name in the URL"
            )
        elif "role" in reason and "does not exist" in reason or "authentication" in reason:
            hint = "; check the user name and password in the URL"
        elif "resolve host" in reason or "could not translate host" in reason:
            hint = "; check the host name in the URL"
        elif "timeout" in reason or "timed out" in reason:
            hint = f"; is a PostgreSQL server running at {host}? check the host and port"
    return f"cannot open database {safe_url(url)!r}: {reason}{hint}"
