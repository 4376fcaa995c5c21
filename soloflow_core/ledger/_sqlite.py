"""Ingest into SQLite: what :func:`soloflow_core.ledger.ingest` runs on a SQLite store.

Lines become the tables' rows in :mod:`soloflow_core.ledger._rows`, read in this process (a
separate reading process did not pay: handing the rows over a pipe cost about what the reading
saved); the lines that module defers take the checked path of :mod:`soloflow_core.ledger.reader`
here; each batch of runs is one transaction of ``executemany`` on the driver's connection
(:func:`~soloflow_core.store.writer.insert_sqlite_bulk`). The WAL checkpoints, which copy each
batch into the database file and fsync it, run on a thread of their own while the next batch is
read (:class:`WalCheckpoints`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import LedgerError
from soloflow_core.ledger._rows import read_chunks
from soloflow_core.ledger.reader import claim, parse_line
from soloflow_core.ledger.report import IngestReport, ProgressCallback
from soloflow_core.store.wal import WalCheckpointer
from soloflow_core.store.writer import (
    BULK_REFUSED,
    bulk_rows,
    insert_sqlite_bulk,
    now,
    sqlite_stamp,
)

if TYPE_CHECKING:
    from soloflow_core.store import Store

BATCH_RUNS = 2000
"""Runs per transaction. Smaller than PostgreSQL's 5000: the last batch's checkpoint is the one
the ingest waits for (see :class:`WalCheckpoints`). How the size was chosen:
benchmarks/HISTORY.md#ingest."""


@dataclass(slots=True)
class _Batch:
    """Rows waiting for their transaction (the layout of :mod:`soloflow_core.ledger._rows`)."""

    runs: list[tuple[Any, ...]] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    models: list[tuple[Any, ...]] = field(default_factory=list)
    lines: dict[int, int] = field(default_factory=dict)
    """Line number per ordinal, for the runs the database refuses."""


def ingest_sqlite(
    store: Store,
    files: list[str],
    sizes: list[int],
    default_user: str,
    default_agent: str,
    on_progress: ProgressCallback | None,
    keep_namespaces: bool,
) -> IngestReport:
    """:func:`ingest` on SQLite: lines become rows in :mod:`soloflow_core.ledger._rows`,
    the lines it defers take the checked path here,
    and each batch is one transaction of ``executemany`` on the driver's connection,
    checkpointed by :class:`WalCheckpoints` while the next batch is read."""
    total = sum(sizes)
    report = IngestReport()
    errors: list[tuple[int, LedgerError]] = []
    stamp = sqlite_stamp(store.engine.dialect)
    batch, file_index = _Batch(), 0
    raw = store.db.driver_connection()
    driver: Any = raw.driver_connection
    checkpoints: WalCheckpoints | None = None
    try:
        checkpoints = WalCheckpoints(store, driver)
        # Checking each call's run costs a fifth of the write; the rows are built so that
        # every call points at a run of its own transaction.
        driver.execute("PRAGMA foreign_keys = OFF")
        chunks = read_chunks(files, default_user, default_agent, keep_namespaces=keep_namespaces)
        write = checkpoints.around(_write_bulk)
        try:
            for chunk in chunks:
                if chunk[1] != file_index:  # a batch never spans files
                    errors += write(driver, batch, report, files[file_index], stamp)
                    batch, file_index = _Batch(), chunk[1]
                name = files[file_index]
                if chunk[0] == "unreadable":
                    raise LedgerError(chunk[2], path=name)
                if chunk[0] == "broken":
                    _, _, ordinal, line, reason, position = chunk
                    report.lines += 1
                    errors.append((ordinal, LedgerError(reason, path=name, line=line)))
                else:
                    position = chunk[-1]
                    errors += _take_chunk(
                        chunk,
                        batch,
                        report,
                        name=name,
                        stamp=stamp,
                        default_user=default_user,
                        default_agent=default_agent,
                        keep_namespaces=keep_namespaces,
                    )
                    if len(batch.runs) >= BATCH_RUNS:
                        errors += write(driver, batch, report, name, stamp)
                        batch = _Batch()
                if on_progress is not None:
                    done = sum(sizes[:file_index]) + min(position, sizes[file_index])
                    on_progress(report.lines, done, total)
        except LedgerError:  # reading failed: what was read before is written
            errors += write(driver, batch, report, files[file_index], stamp)
            raise
        finally:
            chunks.close()  # closes the file being read
        errors += write(driver, batch, report, files[file_index], stamp)
    finally:
        try:
            if checkpoints is not None:
                checkpoints.close()
            driver.execute("PRAGMA foreign_keys = ON")
        finally:
            raw.close()
    report.files = len(files)
    report.errors = [e for _, e in sorted(errors, key=lambda pair: pair[0])]
    if on_progress is not None:
        on_progress(report.lines, total, total)
    return report


def _take_chunk(
    chunk: tuple[Any, ...],
    batch: _Batch,
    report: IngestReport,
    *,
    name: str,
    stamp: Callable[[datetime], str],
    default_user: str,
    default_agent: str,
    keep_namespaces: bool,
) -> list[tuple[int, LedgerError]]:
    """Add a chunk of rows to ``batch``; its deferred lines take the checked path."""
    _, _, first, numbers, runs, calls, models, namespaces, deferred, _ = chunk
    report.lines += len(numbers)
    batch.runs += runs
    batch.calls += calls
    batch.models += models
    batch.lines.update(zip(range(first, first + len(numbers)), numbers, strict=True))
    for key, count in namespaces.items():
        key = tuple(key)
        report.namespaces[key] = report.namespaces.get(key, 0) + count
    errors: list[tuple[int, LedgerError]] = []
    for ordinal, data in deferred:
        line = numbers[ordinal - first]
        try:
            item = parse_line(data, default_user, default_agent)
        except LedgerError as exc:
            errors.append((ordinal, LedgerError(exc.reason, path=name, line=line)))
            continue
        if not keep_namespaces:
            item = claim(item, default_user, default_agent)
        key = (item.user_id, item.agent_id)
        report.namespaces[key] = report.namespaces.get(key, 0) + 1
        run, run_calls, run_models = bulk_rows(ordinal, item, stamp)
        batch.runs.append(run)
        batch.calls += run_calls
        batch.models += run_models
    return errors


def _write_bulk(
    driver: Any, batch: _Batch, report: IngestReport, path: str, stamp: Callable[[datetime], str]
) -> list[tuple[int, LedgerError]]:
    """Write one batch in one transaction; if the database refuses it, write its runs one
    by one so that only the refused runs are lost. Returns their errors."""
    if not batch.runs:
        return []
    created = stamp(now())
    refused: list[tuple[int, LedgerError]] = []
    try:
        skipped = len(
            insert_sqlite_bulk(
                driver, batch.runs, batch.calls, models=batch.models, created=created
            )
        )
    except BULK_REFUSED:
        skipped = 0
        calls: dict[int, list[tuple[Any, ...]]] = {}
        models: dict[int, list[tuple[Any, ...]]] = {}
        for c in batch.calls:
            calls.setdefault(c[0], []).append(c)
        for m in batch.models:
            models.setdefault(m[0], []).append(m)
        for run in sorted(batch.runs):
            ordinal = run[0]
            try:
                skipped += len(
                    insert_sqlite_bulk(
                        driver,
                        [run],
                        calls.get(ordinal, []),
                        models=models.get(ordinal, []),
                        created=created,
                    )
                )
            except BULK_REFUSED as exc:
                cause = str(exc).strip().splitlines()[0]
                message = f"the database refused run {run[1]!r}: {cause}"
                line = batch.lines[ordinal]
                refused.append((ordinal, LedgerError(message, path=path, line=line)))
    report.runs_written += len(batch.runs) - skipped - len(refused)
    report.runs_skipped_existing += skipped
    return refused


class WalCheckpoints:
    """WAL checkpoints of the ingest's connection, on a thread and a connection of their own.

    A checkpoint copies what the WAL holds into the database file and fsyncs both: on a large
    batch a third of the write's time, spent in SQLite with the GIL released. So the ingest's
    connection does not checkpoint at its commits (``wal_autocheckpoint = 0``); after each
    commit the thread checkpoints that batch while the next one is read, and the next write
    waits until it is done. The WAL then starts again from its beginning (SQLite restarts it
    when every frame is in the database): it holds one batch, unless a reader in another
    connection keeps an older snapshot meanwhile (a passive checkpoint leaves it the frames
    it may read; the next one copies them).
    The last batch is checkpointed before :func:`ingest` returns, as SQLite's automatic
    checkpoint would have done at its commit. How a commit reaches the disk does not change.

    The checkpoints are a :class:`~soloflow_core.store.wal.WalCheckpointer`'s, as the flow
    journal's are; the journal never waits for them (it keeps the WAL short by holding its lock
    for the tail), ingest can, and waiting keeps the WAL to one batch with no lock at all.

    Nothing of this on a database without a WAL (``:memory:``).
    """

    __slots__ = ("_driver", "_autocheckpoint", "_checkpoints")

    def __init__(self, store: Store, driver: Any) -> None:
        self._driver = driver
        self._checkpoints: WalCheckpointer | None = None
        self._autocheckpoint = 0
        if driver.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            return
        self._autocheckpoint = int(driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        driver.execute("PRAGMA wal_autocheckpoint = 0")
        self._checkpoints = WalCheckpointer(store.db, name="soloflow-ingest-checkpoint")

    def around(self, write: Callable[..., Any]) -> Callable[..., Any]:
        """``write``, waiting for the checkpoint of the batch before it and asking for its own."""
        checkpoints = self._checkpoints
        if checkpoints is None:
            return write

        def write_then_checkpoint(*args: Any, **kwargs: Any) -> Any:
            checkpoints.wait()
            result = write(*args, **kwargs)
            checkpoints.request()
            return result

        return write_then_checkpoint

    def close(self) -> None:
        """Wait for the last batch's checkpoint, stop the thread, and give the connection back
        its automatic checkpoints."""
        if self._checkpoints is None:
            return
        try:
            self._checkpoints.wait()
            self._checkpoints.close()
        finally:
            self._driver.execute(f"PRAGMA wal_autocheckpoint = {self._autocheckpoint}")
        try:  # what a checkpoint could not copy (busy) goes now, as SQLite's own would
            self._driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:  # committed already: SQLite's next checkpoint copies it
            pass
