"""WalCheckpointer: WAL checkpoints of a SQLite file on a thread of their own."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from soloflow_core.store import Store
from soloflow_core.store.wal import WalCheckpointer


def _wal_frames(db: Path) -> tuple[int, int]:
    """(frames in the WAL, frames of it in the database) after a passive checkpoint of a fresh
    connection: equal when the WAL held nothing left to copy."""
    probe = sqlite3.connect(db)
    try:
        _busy, frames, copied = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        probe.close()
    return frames, copied


@pytest.fixture
def store_file(tmp_path: Path):
    db = tmp_path / "wal.db"
    store = Store.open(f"sqlite:///{db}")
    writer = sqlite3.connect(db, check_same_thread=False)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE t (x TEXT)")
    try:
        yield store, writer, db
    finally:
        writer.close()
        store.close()


def _write(writer: sqlite3.Connection, rows: int) -> None:
    writer.executemany("INSERT INTO t VALUES (?)", [("x" * 2000,) for _ in range(rows)])
    writer.commit()


def test_wait_returns_when_what_was_committed_is_in_the_database(store_file):
    store, writer, db = store_file
    checkpoints = WalCheckpointer(store.db)
    try:
        _write(writer, 500)  # ~1 MB, in the WAL only: the writer does not checkpoint
        assert db.stat().st_size < 100_000
        checkpoints.request()
        checkpoints.wait()
        assert db.stat().st_size > 1_000_000  # copied into the database file
        # And completely: the writer's next commit restarts the WAL from its beginning.
        _write(writer, 10)
        assert _wal_frames(db)[0] < 20
    finally:
        checkpoints.close()
    assert checkpoints.thread is not None and not checkpoints.thread.is_alive()


def test_the_tail_runs_under_the_writers_lock(store_file):
    store, writer, _db = store_file
    lock = threading.Lock()
    checkpoints = WalCheckpointer(store.db, tail_lock=lock)
    try:
        _write(writer, 50)
        with lock:
            checkpoints.request()
            waiter = threading.Thread(target=checkpoints.wait)
            waiter.start()
            waiter.join(0.5)
            assert waiter.is_alive()  # the checkpoint waits for the lock for its tail
        waiter.join(10)
        assert not waiter.is_alive()
    finally:
        checkpoints.close()


def test_requests_while_one_runs_are_all_served_and_close_stops_the_thread(store_file):
    store, writer, db = store_file
    checkpoints = WalCheckpointer(store.db, name="wal-test")
    try:
        for _ in range(5):
            _write(writer, 100)
            checkpoints.request()
        checkpoints.wait()
        assert db.stat().st_size > 1_000_000  # all 500 rows (~1 MB) copied
        assert [t for t in threading.enumerate() if t.name == "wal-test"]
    finally:
        checkpoints.close()
    assert not [t for t in threading.enumerate() if t.name == "wal-test"]
    checkpoints.wait()  # nothing running: returns at once


def test_ctrl_c_as_the_thread_starts_leaves_close_nothing_to_trip_on(store_file, monkeypatch):
    """A Ctrl-C that lands while the checkpoint thread starts (seen in `soloflow ingest`):
    the KeyboardInterrupt reaches the caller, and close() does not replace it with 'cannot
    join thread before it is started'."""
    store, _writer, _db = store_file
    checkpoints = WalCheckpointer(store.db, name="wal-interrupted")

    def interrupted(self: threading.Thread) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(threading.Thread, "start", interrupted)
        with pytest.raises(KeyboardInterrupt):
            checkpoints.request()
    checkpoints.close()  # no RuntimeError
    checkpoints.request()  # and it can still be asked once the interrupt is handled
    checkpoints.wait()
    checkpoints.close()
    assert not [t for t in threading.enumerate() if t.name == "wal-interrupted"]
