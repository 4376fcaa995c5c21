"""The spill file: runs a capture could not store, kept as ledger lines until they can be.

A capture (``SoloFlowCallbackHandler``) that cannot write a run appends it here, one JSON line
in the ledger format (``docs/ledger.md``), with its own namespace; the next capture that
reaches the store, or ``soloflow ingest --spill PATH``, writes the file back and empties it.
Appending and writing back hold an exclusive ``flock`` on the file, so any number of processes
may share one. Writing back skips run ids already stored, so a run both stored and spilled
(a write that finished after the capture stopped waiting) is stored once.

Example:
    >>> append_spill("runs.db.spill.jsonl", [run], limit_bytes=SPILL_LIMIT_BYTES)  # doctest: +SKIP
    >>> write_back_spill(store, "runs.db.spill.jsonl").runs_written  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from soloflow_core.ledger.ingester import ingest
from soloflow_core.ledger.reader import StrPath, dump_run
from soloflow_core.ledger.report import IngestReport
from soloflow_core.store.json_values import jsonable

if TYPE_CHECKING:
    from soloflow_core.models import TaskRun
    from soloflow_core.store import Store

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["SPILL_LIMIT_BYTES", "append_spill", "spill_path_for", "write_back_spill"]

SPILL_LIMIT_BYTES = 64 << 20
"""The default bound of a spill file: 64 MiB. A run that would take it past is dropped, and
said so."""


def spill_path_for(url: str, home: Path) -> Path:
    """Where the spill file of the store at ``url`` (a resolved SQLAlchemy URL) lives: next to
    a SQLite file (``runs.db`` → ``runs.db.spill.jsonl``); for a server database or an
    in-memory one, in ``home`` (``spill-<host>-<port>-<database>.jsonl``)."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return Path(f"{parsed.database}.spill.jsonl")
    name = f"{parsed.host or 'local'}-{parsed.port or 'default'}-{parsed.database or 'memory'}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return home / f"spill-{safe}.jsonl"


@contextlib.contextmanager
def _locked(path: Path, mode: str) -> Iterator[IO[bytes]]:
    with open(path, mode) as f:
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield f
        finally:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def append_spill(path: StrPath, runs: Sequence[TaskRun], *, limit_bytes: int) -> int:
    """Append ``runs`` to the spill file at ``path`` (created with its directory), flushed
    and fsynced before returning; returns how many were appended — the others would have
    taken the file past ``limit_bytes``.

    Raises:
        OSError: the file cannot be written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    lines: list[bytes] = []
    with _locked(target, "ab") as f:
        start = size = f.seek(0, os.SEEK_END)
        for run in runs:
            line = (json.dumps(jsonable(dump_run(run)), ensure_ascii=False) + "\n").encode()
            if size + len(line) > limit_bytes:
                break
            lines.append(line)
            size += len(line)
        _write_whole(f.fileno(), b"".join(lines), start)
    return len(lines)


def _write_whole(fd: int, data: bytes, start: int) -> None:
    """Write ``data`` at the end of the file and fsync it, or leave the file ``start`` bytes
    long: a write cut short (disk full, file size limit) leaves no torn line behind."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def write_back_spill(store: Store, path: StrPath) -> IngestReport:
    """Ingest the spill file at ``path`` into ``store`` (each run into its own namespace,
    run ids already stored skipped), then empty it. A missing file is an empty report.

    Lines that are not valid records are reported in the report's ``errors`` and dropped
    with the rest; if the store fails, the file is left as it was.
    """
    target = Path(path)
    if not target.exists():
        return IngestReport()
    with _locked(target, "r+b") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return IngestReport()
        report = ingest(
            store,
            [target],
            default_user="default",
            default_agent="default",
            keep_namespaces=True,
        )
        f.truncate(0)
        f.flush()
        os.fsync(f.fileno())
    return report
