"""Ingest into SQLite: what :func:`soloflow_core.ledger.ingest` runs on a SQLite store.

Lines become the tables' rows in :mod:`soloflow_core.ledger_rows`, read in this process (a
separate reading process did not pay: handing the rows over a pipe cost about what the reading
saved); the lines that module defers take the checked path of :mod:`soloflow_core.ledger`
here; each batch of runs is one transaction of ``executemany`` on the driver's connection
(:func:`~soloflow_core.store.writer.insert_sqlite_bulk`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import LedgerError
from soloflow_core.ledger import IngestReport, ProgressCallback, _claim, _parse_line
from soloflow_core.ledger_rows import read_chunks
from soloflow_core.store.writer import (
    BULK_REFUSED,
    bulk_rows,
    insert_sqlite_bulk,
    now,
    sqlite_stamp,
)

if TYPE_CHECKING:
    from soloflow_core.store import Store

_BATCH = 5000
"""Runs per transaction."""


@dataclass(slots=True)
class _Batch:
    """Rows waiting for their transaction (the layout of :mod:`soloflow_core.ledger_rows`)."""

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
    """:func:`ingest` on SQLite: lines become rows in :mod:`soloflow_core.ledger_rows`,
    the lines it defers take the checked path here,
    and each batch is one transaction of ``executemany`` on the driver's connection."""
    total = sum(sizes)
    report = IngestReport()
    errors: list[tuple[int, LedgerError]] = []
    stamp = sqlite_stamp(store.engine.dialect)
    batch, file_index = _Batch(), 0
    raw = store.engine.raw_connection()
    driver: Any = raw.driver_connection
    try:
        # Checking each call's run costs a fifth of the write; the rows are built so that
        # every call points at a run of its own transaction.
        driver.execute("PRAGMA foreign_keys = OFF")
        chunks = read_chunks(files, default_user, default_agent, keep_namespaces)
        try:
            for chunk in chunks:
                if chunk[1] != file_index:  # a batch never spans files
                    errors += _write_bulk(driver, batch, report, files[file_index], stamp)
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
                        name,
                        stamp,
                        default_user,
                        default_agent,
                        keep_namespaces,
                    )
                    if len(batch.runs) >= _BATCH:
                        errors += _write_bulk(driver, batch, report, name, stamp)
                        batch = _Batch()
                if on_progress is not None:
                    done = sum(sizes[:file_index]) + min(position, sizes[file_index])
                    on_progress(report.lines, done, total)
        except LedgerError:  # reading failed: what was read before is written
            errors += _write_bulk(driver, batch, report, files[file_index], stamp)
            raise
        finally:
            chunks.close()  # closes the file being read
        errors += _write_bulk(driver, batch, report, files[file_index], stamp)
    finally:
        try:
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
            item = _parse_line(data, default_user, default_agent)
        except LedgerError as exc:
            errors.append((ordinal, LedgerError(exc.reason, path=name, line=line)))
            continue
        if not keep_namespaces:
            item = _claim(item, default_user, default_agent)
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
        skipped = len(insert_sqlite_bulk(driver, batch.runs, batch.calls, batch.models, created))
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
                        driver, [run], calls.get(ordinal, []), models.get(ordinal, []), created
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
