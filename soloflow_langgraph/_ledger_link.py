"""The capture's way to the store: a writer thread, a lazy connection, faults noticed.

Private to :mod:`soloflow_langgraph.callbacks`. Each write runs on one writer thread and the
caller waits for it a bounded time; the store is opened lazily (and again, at most every
:data:`RECONNECT_S`, while it is unreachable); a vanished SQLite file or an emptied database is
noticed, said once per episode with an error log line, and the file or schema re-created where
the handler owns the store.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.ledger.spill import append_spill, spill_path_for, write_back_spill
from soloflow_core.store import Store, default_database_path, resolve_database_url
from soloflow_core.store.database import migrate
from soloflow_core.store.engine import safe_url

if TYPE_CHECKING:
    from pathlib import Path

    from soloflow_core.models import TaskRun
    from soloflow_core.tracing import Span

logger = logging.getLogger("soloflow_langgraph.callbacks")

RECONNECT_S = 5.0
"""How often, at most, an unreachable store is tried again (a run meanwhile is spilled)."""
CLOSE_WAIT_S = 2.0
"""How long closing waits for the writer thread's current write."""


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


_STOP: Any = object()


class LedgerLink:
    """The handler's way to the store: a writer thread that opens the store lazily, notices
    a vanished SQLite file or an emptied database (and says so, once per episode), re-creates
    the schema where it may, and runs each write, the caller waiting a bounded time."""

    def __init__(
        self,
        store: Store | None,
        database_url: str | None,
        on_connected: Callable[[Store], None],
    ) -> None:
        self._on_connected = on_connected
        self._owns = store is None
        self.url = str(store.engine.url) if store is not None else _resolve(database_url)
        self.store = store
        self.problem: str | None = None
        self._reported: set[str] = set()
        self._next_try = 0.0
        self._file: tuple[int, int] | None = None
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._path = self._sqlite_path()
        if store is None:
            try:
                self.store = self._open()
            except Exception as exc:
                self._down(f"cannot open the store {safe_url(self.url)}: {_error_text(exc)}")
        if self.store is not None:
            self._file = self._identity()

    def default_spill_path(self) -> Path | None:
        try:
            home = default_database_path().parent
        except Exception:  # no home directory: no default spill file for a server database
            return None
        if _in_memory_sqlite(self.url):
            return None
        return spill_path_for(self.url, home)

    # ---------------------------------------------------------------- the writer thread

    def submit(self, work: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="soloflow-capture-writer", daemon=True
                )
                self._thread.start()
        self._queue.put((work, future))
        return future

    def call(self, work: Callable[[], Any], timeout: float) -> Any:
        return self.submit(work).result(timeout=timeout)

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            work, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work())
            except BaseException as exc:  # handed to the waiting caller
                future.set_exception(exc)

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout=CLOSE_WAIT_S)
        if self._owns and self.store is not None:
            self.store.close()

    # ---------------------------------------------------------------- on the writer thread

    def store_run(self, run: TaskRun, spans: Sequence[Span] = ()) -> bool:
        """Store ``run`` with its ``spans`` (one transaction); False if it was stored already."""
        store = self.connect()

        def write() -> bool:
            return store.add_traced_run(run, spans) if spans else store.add_run(run)

        try:
            fresh = write()
        except sa.exc.SQLAlchemyError as exc:
            if not self._schema_missing(store):
                self.problem = f"storing a run failed: {_error_text(exc)}"
                raise
            self._loud(
                "schema",
                f"the store {safe_url(self.url)} has no SoloFlow tables "
                "any more (database emptied or re-created); re-creating the schema",
            )
            migrate(store.engine)
            fresh = write()
        self._up()
        return fresh

    def write_back(self, spill_path: Path) -> int:
        """Write back the runs of the spill file ``spill_path``; how many were stored."""
        report = write_back_spill(self.connect(), spill_path)
        if report.runs_written or report.errors:
            logger.warning(
                "SoloFlow capture: wrote back %d runs from the spill file %s (%d already stored, "
                "%d bad lines%s)",
                report.runs_written,
                spill_path,
                report.runs_skipped_existing,
                len(report.errors),
                "".join(f"; {e}" for e in report.errors[:5]),
            )
        return report.runs_written

    def connect(self) -> Store:
        """The open store, opened (again) if need be; a vanished SQLite file re-created when
        this handler opened the store."""
        store = self.store
        if store is not None and self._file is not None and self._identity() != self._file:
            path = self._sqlite_path()
            if not self._owns:
                self._loud(
                    "vanished",
                    f"the store file {path} was deleted or replaced under "
                    "the running agent; the store was passed in, so runs are spilled",
                )
                raise StoreVanished(f"the store file {path} vanished")
            self._loud(
                "vanished",
                f"the store file {path} was deleted or replaced under the "
                "running agent; re-creating it",
            )
            store.close()
            self.store = store = None
        if store is None:
            if time.monotonic() < self._next_try:
                raise StoreVanished(self.problem or "the store is unavailable")
            try:
                store = self._open()
            except Exception as exc:
                self._next_try = time.monotonic() + RECONNECT_S
                self._down(f"cannot open the store {safe_url(self.url)}: {_error_text(exc)}")
                raise
            self.store = store
            self._file = self._identity()
            self._on_connected(store)
        return store

    def _open(self) -> Store:
        return Store.open(self.url)

    def _sqlite_path(self) -> str | None:
        if hasattr(self, "_path"):
            return self._path
        parsed = sa.engine.make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
            return None
        return parsed.database

    def _identity(self) -> tuple[int, int] | None:
        """The SQLite file's (device, inode), None for a server database or a missing file."""
        path = self._sqlite_path()
        if path is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return (-1, -1)
        return (st.st_dev, st.st_ino)

    def _schema_missing(self, store: Store) -> bool:
        try:
            with store.db.read() as conn:
                return not sa.inspect(conn).has_table("sf_alembic_version")
        except sa.exc.SQLAlchemyError:
            return False

    # ---------------------------------------------------------------- saying so

    def report(self, kind: str, message: str) -> None:
        self.problem = message
        if kind not in self._reported:
            self._reported.add(kind)
            logger.error("SoloFlow capture: %s", message)

    def _loud(self, kind: str, message: str) -> None:
        self.report(kind, message)

    def _down(self, message: str) -> None:
        self.report("down", message)

    def _up(self) -> None:
        """A write went through: after a problem, say so and let the handler write back."""
        if self.problem is None:
            return
        logger.warning("SoloFlow capture: the store %s takes runs again", safe_url(self.url))
        self.problem = None
        self._reported.clear()
        if self.store is not None:
            self._on_connected(self.store)


class StoreVanished(RuntimeError):
    """The store cannot be reached right now (handled inside the handler: the run is spilled)."""


def _resolve(database_url: str | None) -> str:
    try:
        return resolve_database_url(database_url)
    except Exception:  # e.g. no home directory: the store is then unavailable, said so
        return database_url or "sqlite://"


def has_content(path: Path) -> bool:
    """Whether the file ``path`` exists and is not empty."""
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def spill_one(where: Path, run: TaskRun, limit_bytes: int) -> str | None:
    """Append ``run`` to the spill file ``where``; None when it is there, else why it is not."""
    try:
        kept = append_spill(where, [run], limit_bytes=limit_bytes)
    except OSError as exc:
        return f"the spill file {where} cannot be written ({exc.strerror})"
    return None if kept else f"the spill file {where} is full ({limit_bytes:,} bytes)"


def _in_memory_sqlite(url: str) -> bool:
    """Whether ``url`` is an in-memory SQLite database (``sqlite://``, ``sqlite:///:memory:``,
    a ``mode=memory`` URI); a file whose path holds the word "memory" is not."""
    try:
        parsed = sa.engine.make_url(url)
    except Exception:
        return False
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return (
        database in ("", ":memory:")
        or parsed.query.get("mode") == "memory"
        or "mode=memory" in database
    )


def report_spilled(
    run: TaskRun,
    *,
    why: str,
    refused: str | None,
    where: Path | None,
    report: Callable[[str, str], None],
) -> None:
    """Say where run ``run``, which could not be stored (``why``), is kept: the spill file
    ``where`` (``report``ed once per episode), or only memory (``refused``: reported per run)."""
    if refused is None:
        report(
            "spill",
            f"storing run {run.run_id} failed: {why}; kept in the spill file {where} and "
            f"handler.unsaved (handler.flush(), or `soloflow ingest --spill {where}`, writes it back)",
        )
    else:  # a problem of its own, so that the next write that goes through stores it
        report(
            f"memory {run.run_id}",
            f"run {run.run_id} is only in memory (handler.unsaved), LOST if the process ends "
            f"before the store answers: {why}; {refused}",
        )


def report_let_go(let_go: Sequence[TaskRun], *, lost: Sequence[TaskRun], limit: int) -> None:
    """Log the runs ``handler.unsaved`` let go past its ``limit``: ``lost`` ones (only in
    memory) as errors, the others (in the spill file, written back from there) as warnings."""
    for run in let_go:
        if any(r is run for r in lost):
            logger.error(
                "SoloFlow capture: run %s is LOST: more than %d runs wait to be stored and the "
                "spill file could not take it",
                run.run_id,
                limit,
            )
        else:
            logger.warning(
                "SoloFlow capture: run %s left to the spill file (more than %d runs wait to be stored)",
                run.run_id,
                limit,
            )
