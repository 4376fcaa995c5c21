"""Opening a database: URL resolution, engine settings per dialect, schema migration."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from soloflow_core.errors import SchemaVersionError, StoreError
from soloflow_core.store.schema import SCHEMA_REVISION

ENV_DATABASE_URL = "SOLOFLOW_DATABASE_URL"
ENV_HOME = "SOLOFLOW_HOME"
VERSION_TABLE = "sf_alembic_version"
WRITE_OPTION = "soloflow_write"
_MIGRATIONS = Path(__file__).with_name("migrations")


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


def _current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return _revision_on(conn)


def _revision_on(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    return conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


MIGRATION_LOCK_KEY = 0x50F1_0F10_0025
"""The PostgreSQL advisory lock (``pg_advisory_xact_lock``) that serialises SoloFlow's schema
migrations in a database: one process creates or upgrades the schema, the others wait and
then find it done."""
MIGRATION_WAIT_S = 120.0
"""How long opening a SQLite store waits for another process's migration (a retried
``BEGIN IMMEDIATE``, on top of the 30 s busy timeout of each attempt) before giving up."""


def _known_revisions() -> list[str]:
    return sorted(p.stem.split("_", 1)[0] for p in (_MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def migrate(engine: Engine) -> None:
    """Bring the schema to ``SCHEMA_REVISION`` with Alembic; refuse a newer database.

    Raises:
        SchemaVersionError: the database was written by a SoloFlow with a schema this
            version does not know.
    """
    if engine.dialect.name == "sqlite":
        _retry_while_locked(lambda: _migrate(engine))
    else:
        _migrate(engine)


def _migrate(engine: Engine) -> None:
    current = _current_revision(engine)
    if current == SCHEMA_REVISION:
        return
    if current is not None and current not in _known_revisions():
        raise SchemaVersionError(
            f"database {safe_url(str(engine.url))!r} has schema revision {current!r}, which this "
            f"SoloFlow (schema {SCHEMA_REVISION!r}) does not know: it was written by a newer "
            "version. Upgrade soloflow-engine, or point --db at another database."
        )
    _upgrade(engine.execution_options(**{WRITE_OPTION: True}))


def _upgrade(engine: Engine) -> None:
    """Upgrade to head in one transaction that first takes the migration lock: on
    PostgreSQL :data:`MIGRATION_LOCK_KEY`, on SQLite the write lock (``BEGIN IMMEDIATE``,
    the engine's write option). The revision is read again under the lock: a process that
    waited finds the schema another one just created, and does nothing."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        if _revision_on(conn) == SCHEMA_REVISION:
            return
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def _retry_while_locked(attempt: Callable[[], None]) -> None:
    """Run ``attempt``, again while SQLite answers "database is locked" (another process
    creating the file's schema), for up to :data:`MIGRATION_WAIT_S` seconds."""
    deadline = time.monotonic() + MIGRATION_WAIT_S
    pause = 0.01
    while True:
        try:
            attempt()
            return
        except sa.exc.OperationalError as exc:
            text = str(exc.orig).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
        time.sleep(pause + random.random() * pause)
        pause = min(pause * 2, 0.5)
