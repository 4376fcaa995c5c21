"""WAL checkpoints of a SQLite file on a thread and a connection of their own.

A checkpoint copies what the WAL holds into the database file and fsyncs both. SQLite runs one
inside whichever commit crosses ``wal_autocheckpoint`` pages: a step of a flow run, or a batch of
an ingest, would wait for it. The store's heavy writers (the flow journal, ingest) turn their
own connection's automatic checkpoints off and ask a :class:`WalCheckpointer` instead: its
thread checkpoints on another pooled connection, inside SQLite with the GIL released, while the
writer goes on. A writer that must bound the WAL waits for the checkpoint it asked for
(:meth:`WalCheckpointer.wait`, ingest); one that must not wait hands over a lock under which the
checkpoint's tail runs, so the checkpoint completes and the WAL restarts (the journal).
"""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soloflow_core.store.database import Database


class WalCheckpointer:
    """Checkpoints ``db``'s WAL (``PRAGMA wal_checkpoint(PASSIVE)``) when asked, on a
    daemon thread started on the first :meth:`request`, with a connection of its pool.

    With ``tail_lock``, each checkpoint runs a second time holding that lock: the frames the
    writer committed during the first are copied too, so the checkpoint completes and the
    writer's next commit starts the WAL from its beginning.
    """

    def __init__(
        self,
        db: Database,
        *,
        tail_lock: threading.Lock | None = None,
        name: str = "soloflow-wal-checkpoint",
    ) -> None:
        self.db = db
        self._tail_lock = tail_lock
        self._name = name
        self._cv = threading.Condition()
        self._requested = self._done = 0
        self._closing = False
        self.thread: threading.Thread | None = None

    def request(self) -> None:
        """Checkpoint soon (what is committed by now, at the least)."""
        with self._cv:
            self._requested += 1
            if self.thread is None or not self.thread.is_alive():
                # Kept once started: a Ctrl-C between the two must not leave close() a thread
                # it cannot join (RuntimeError in place of the KeyboardInterrupt).
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                thread.start()
                self.thread = thread
            self._cv.notify_all()

    def wait(self) -> None:
        """Until every checkpoint requested so far has run (or the thread is gone: a
        checkpoint that could not run is caught up by the next one, or by SQLite's own)."""
        with self._cv:
            target = self._requested
            while self._done < target and self.thread is not None and self.thread.is_alive():
                self._cv.wait(1.0)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread once the checkpoint under way is done (call it without holding the
        tail lock) and give its connection back."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
            thread = self.thread
        if thread is not None and thread.ident is not None:  # started
            thread.join(timeout=timeout)

    def _run(self) -> None:
        try:
            raw = self.db.driver_connection()
        except Exception:  # no connection now: the next request starts a new thread
            with self._cv:
                self._cv.notify_all()
            return
        conn: Any = raw.driver_connection
        try:
            while True:
                with self._cv:
                    while self._done == self._requested and not self._closing:
                        self._cv.wait()
                    if self._closing:
                        return
                    target = self._requested
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    if self._tail_lock is not None:
                        with self._tail_lock:
                            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # busy or closing: the next one, or SQLite's own, catches up
                    pass
                with self._cv:
                    self._done = target
                    self._cv.notify_all()
        finally:
            raw.close()
            with self._cv:
                self._cv.notify_all()


__all__ = ["WalCheckpointer"]
