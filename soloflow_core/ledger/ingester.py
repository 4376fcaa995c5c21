"""Ingest: ledger files streamed into the store, good lines written, bad ones reported.

A SQLite store takes the fast lane of :mod:`soloflow_core.ledger._sqlite`; any other store
the batched lane here. Both read lines through :mod:`soloflow_core.ledger.reader`.

Example:
    >>> report = ingest(store, ["runs.jsonl.gz"], default_user="alice", default_agent="bot")
    >>> report.runs_written, [str(e) for e in report.errors]
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import sqlalchemy as sa

from soloflow_core.errors import LedgerError
from soloflow_core.ledger._sqlite import ingest_sqlite
from soloflow_core.ledger.reader import StrPath, claim, read_records
from soloflow_core.ledger.report import IngestReport, ProgressCallback
from soloflow_core.models.ledger import TaskRun
from soloflow_core.models.names import check_namespace
from soloflow_core.store.writer import RunRow

if TYPE_CHECKING:
    from soloflow_core.store import Store

__all__ = ["ingest"]

_BATCH = 5000
_PROGRESS_EVERY = 200
# The database refused a run (bad value, constraint): that run's line is reported.
_REJECTED_BY_DATABASE = (sa.exc.DataError, sa.exc.IntegrityError, UnicodeEncodeError)


def ingest(
    store: Store,
    paths: Iterable[StrPath],
    *,
    default_user: str,
    default_agent: str,
    on_progress: ProgressCallback | None = None,
    keep_namespaces: bool = False,
) -> IngestReport:
    """Stream ledger files into ``store``: good lines are written, bad ones reported.

    Every run lands in the caller's namespace (``default_user``, ``default_agent``): a file
    cannot write into someone else's. A record's own ``user_id``/``agent_id``, when it
    differs, is kept in ``meta["ledger_user_id"]``/``meta["ledger_agent_id"]``. With
    ``keep_namespaces=True`` (an operator ingesting a fleet's ledger) the record's own
    namespace is used instead, a null one taking the defaults.

    Runs are written in batches, each run whole with all its calls. A run id already stored
    in its namespace is skipped, so ingesting the same file twice writes nothing new.

    Args:
        on_progress: called now and then with ``(lines_done, bytes_done, total_bytes)``,
            bytes being those of the files on disk (compressed for gzip).

    Raises:
        LedgerError: a file does not exist or cannot be read; nothing was written.
        InvalidNameError: ``default_user`` or ``default_agent`` holds a control character.
    """
    check_namespace(default_user, default_agent)
    files = [os.fspath(p) for p in paths]
    sizes: list[int] = []
    for name in files:
        try:
            sizes.append(os.stat(name).st_size)
        except OSError as exc:
            raise LedgerError(f"cannot read the file: {exc.strerror}", path=name) from exc
    if store.engine.dialect.name == "sqlite":
        ingest_files = ingest_sqlite
    else:
        ingest_files = _ingest_files
    with _cyclic_gc_paused():
        return ingest_files(
            store, files, sizes, default_user, default_agent, on_progress, keep_namespaces
        )


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector (reference counting still frees everything).

    A batch of parsed runs waiting for its write is some 10^5 live containers, which every
    full collection walks again: on a large ledger the collector took more time than the
    parsing. Nothing ingest creates forms a reference cycle; whatever does is collected
    once the collector is back on.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _ingest_files(
    store: Store,
    files: list[str],
    sizes: list[int],
    default_user: str,
    default_agent: str,
    on_progress: ProgressCallback | None,
    keep_namespaces: bool,
) -> IngestReport:
    total = sum(sizes)
    report = IngestReport()
    # Errors are keyed by the ordinal of their line, so that lines the database refuses
    # (found when their batch is written) still come out in reading order.
    errors: list[tuple[int, LedgerError]] = []
    pending: list[tuple[int, int, TaskRun | RunRow]] = []
    done_before = 0
    for name, size in zip(files, sizes, strict=True):
        for line, item, position in read_records(name, default_user, default_agent):
            report.lines += 1
            if isinstance(item, LedgerError):
                errors.append((report.lines, item))
            else:
                if not keep_namespaces:
                    item = claim(item, default_user, default_agent)
                pending.append((report.lines, line, item))
                key = (item.user_id, item.agent_id)
                report.namespaces[key] = report.namespaces.get(key, 0) + 1
                if len(pending) >= _BATCH:
                    errors += _write(store, pending, report, path=name)
                    pending = []
            if on_progress is not None and report.lines % _PROGRESS_EVERY == 0:
                on_progress(report.lines, done_before + min(position, size), total)
        if pending:  # a batch never spans files: a refused run's line belongs to `name`
            errors += _write(store, pending, report, path=name)
            pending = []
        report.files += 1
        done_before += size
    report.errors = [e for _, e in sorted(errors, key=lambda pair: pair[0])]
    if on_progress is not None:
        on_progress(report.lines, total, total)
    return report


def _write(
    store: Store,
    pending: list[tuple[int, int, TaskRun | RunRow]],
    report: IngestReport,
    *,
    path: str,
) -> list[tuple[int, LedgerError]]:
    """Write one batch; if the database refuses it, write its runs one by one so that only
    the refused runs are lost. Returns their errors."""
    try:
        written = store.add_runs([run for _, _, run in pending])
        refused: list[tuple[int, LedgerError]] = []
    except _REJECTED_BY_DATABASE:
        written, refused = 0, []
        for ordinal, line, run in pending:
            try:
                written += store.add_run(run)
            except _REJECTED_BY_DATABASE as exc:
                cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
                message = f"the database refused run {run.run_id!r}: {cause}"
                refused.append((ordinal, LedgerError(message, path=path, line=line)))
    report.runs_written += written
    report.runs_skipped_existing += len(pending) - written - len(refused)
    return refused
