"""The store's database: the one place that opens connections and transactions.

:class:`Database` owns the engine; every repository of :class:`~soloflow_core.store.Store`
takes it by constructor and reads (:meth:`Database.read`), writes (:meth:`Database.write`) or
reaches the driver (:meth:`Database.driver_connection`) through it. Opening it creates or
migrates the schema (Alembic, :data:`SCHEMA_REVISION`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.errors import SchemaVersionError, StoreError
from soloflow_core.store.engine import (
    WRITE_OPTION,
    create_store_engine,
    open_failure,
    resolve_database_url,
    safe_url,
)
from soloflow_core.store.schema import SCHEMA_REVISION
from soloflow_core.store.writer import sqlite_stamp

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.pool import PoolProxiedConnection

VERSION_TABLE = "sf_alembic_version"
_MIGRATIONS = Path(__file__).with_name("migrations")


class Database:
    """A SQLite or PostgreSQL database opened for the store; :meth:`close` releases it.

    Example:
        >>> db = Database.open("sqlite:///:memory:")
        >>> with db.read() as conn:
        ...     conn.execute(sa.text("SELECT 1")).scalar()
        1
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self.dialect: str = engine.dialect.name
        """``"sqlite"`` or ``"postgresql"``."""
        self.stamp: Any = sqlite_stamp(engine.dialect) if self.dialect == "sqlite" else None
        """SQLite: a timestamp as the driver stores it (see ``writer.sqlite_stamp``)."""
        self._journal: Database | None = None

    @classmethod
    def open(cls, url: str | None = None) -> Database:
        """Open (and create or migrate) the database at ``url``; see ``resolve_database_url``."""
        resolved = resolve_database_url(url)
        engine = create_store_engine(resolved)
        try:
            migrate(engine)
        except StoreError:
            engine.dispose()
            raise
        except sa.exc.SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(open_failure(resolved, exc)) from exc
        return cls(engine)

    @property
    def url(self) -> str:
        """The URL, password masked."""
        return safe_url(str(self.engine.url))

    def read(self) -> Connection:
        """A connection for reads, to use as ``with db.read() as conn``."""
        return self.engine.connect()

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``), committed when the block ends,
        rolled back when it raises: ``with db.write() as conn``."""
        return self._writer.begin()

    def driver_connection(self) -> PoolProxiedConnection:
        """The driver's connection, checked out of the pool; ``close()`` gives it back.
        For the hot paths that skip SQLAlchemy's statement layer."""
        return self.engine.raw_connection()

    def journal(self) -> Database:
        """The database of the hot paths: flow-run records, flow lookups, latest versions.

        On SQLite this database. On PostgreSQL the same database through a pool of its own
        that skips the pre-ping: a round trip fewer per use. Its commits are synchronous (the
        server's setting): with the runtime's ``durability="exit"`` the step journal is what
        keeps a run's steps exactly-once, so each of its writes is durable when it returns
        (see :meth:`~soloflow_core.store.journal_io.JournalSql.build`). Closed with this one."""
        if self.dialect != "postgresql":
            return self
        if self._journal is None:
            engine = sa.create_engine(self.engine.url, pool_pre_ping=False, pool_size=4)
            self._journal = Database(engine)
        return self._journal

    def close(self) -> None:
        """Close every connection of its pools (the journal's too)."""
        if self._journal is not None:
            self._journal.engine.dispose()
            self._journal = None
        self.engine.dispose()


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
