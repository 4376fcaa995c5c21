"""The runtime's PostgreSQL checkpointer: LangGraph's ``PostgresSaver`` that also carries the
step journal's writes in its own transactions.

LangGraph saves a step's writes (``put_writes``) and each superstep's checkpoint (``put``)
as it goes; with ``durability="sync"`` the checkpoint is saved before the next superstep's
nodes run. A step's journal write — its completion and the begins of the steps that wait
for it alone (``StepJournal.begin_ahead``) — is handed to this saver as a *ride* for the
run's thread: the saver's next ``put_writes`` or ``put`` of that thread sends it in the same
pipeline and transaction as the checkpoint rows (after them, once the save has queued all of
its own), so it costs no round trip and no commit of its own. A ride that no save has taken when the journal needs its answer is taken back,
and the journal writes it itself, as it would have without this saver.

The statements ride in the checkpoint's transaction, so they commit (synchronously) with it:
the step's completion and the next begin are durable exactly when the checkpoint holding the
step's writes is.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import tuple_row

log = logging.getLogger(__name__)


class Ride:
    """Statements waiting, in order, for a checkpoint save of their run's thread."""

    __slots__ = ("done", "rows", "saver", "statements", "taken", "thread_id")

    def __init__(self, saver: JournalingPostgresSaver, thread_id: str,
                 statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        self.saver, self.thread_id = saver, thread_id
        self.statements = list(statements)
        self.taken = False
        self.done = threading.Event()
        self.rows: list[list[tuple[Any, ...]]] | None = None

    def __call__(self) -> list[list[tuple[Any, ...]]] | None:
        """Each statement's rows once a save wrote them; None when none did (the ride is taken
        back: the caller writes them) or the save failed (nothing of it committed)."""
        if self.saver.take_back(self):
            return None
        self.done.wait()
        return self.rows


class JournalingPostgresSaver(PostgresSaver):
    """``PostgresSaver`` whose saves also write the rides of their thread (see the module
    docstring)."""

    carries_journal = True
    """What the runtime checks (without importing this module, whose imports need psycopg)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rides: dict[str, list[Ride]] = {}
        self._rides_lock = threading.Lock()
        self._local = threading.local()

    def ride(self, thread_id: str, statements: Sequence[tuple[str, Sequence[Any]]]) -> Ride:
        """Send ``statements`` (with their parameters) with the next save of ``thread_id``, in
        order; call the result for their rows."""
        ride = Ride(self, thread_id, statements)
        with self._rides_lock:
            self._rides.setdefault(thread_id, []).append(ride)
        return ride

    def take_back(self, ride: Ride) -> bool:
        """Withdraw ``ride`` if no save has taken it yet."""
        with self._rides_lock:
            if ride.taken:
                return False
            waiting = self._rides.get(ride.thread_id)
            if waiting is not None and ride in waiting:
                waiting.remove(ride)
                if not waiting:
                    del self._rides[ride.thread_id]
            return True

    def _take(self, config: Any) -> list[Ride]:
        thread_id = str(((config or {}).get("configurable") or {}).get("thread_id"))
        with self._rides_lock:
            rides = self._rides.pop(thread_id, [])
            for ride in rides:
                ride.taken = True
        return rides

    @contextlib.contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        rides: list[Ride] | None = getattr(self._local, "rides", None)
        if not rides or not pipeline:
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        self._local.rides = None
        sent: list[tuple[Ride, list[Any]]] = []
        try:
            with super()._cursor(pipeline=True) as cur:
                yield cur
                # After the save's own statements, in the same implicit transaction, and only
                # when the save queued them all: a save that raises first (a value its serde
                # refuses, say) sends none of them — its pipeline still syncs, and commits,
                # whatever it had queued, so a ride sent before would be written while it is
                # answered "not sent" and written again by the journal.
                for ride in rides:
                    curs = []
                    for statement, params in ride.statements:
                        rc = cur.connection.cursor(row_factory=tuple_row)
                        curs.append(rc)
                        rc.execute(statement, params)
                    sent.append((ride, curs))
            for ride, curs in sent:  # the pipeline has synced: every result is in
                ride.rows = [rc.fetchall() for rc in curs]
        finally:
            for _, curs in sent:
                for rc in curs:
                    rc.close()
            for ride in rides:
                ride.done.set()

    def _carrying(self, config: Any) -> list[Ride]:
        rides = self._take(config)
        self._local.rides = rides or None
        return rides

    def _landed(self, rides: list[Ride]) -> None:
        """After a save: rides it did not send (it opened no pipeline) are answered None."""
        if self._local.rides is not None:
            self._local.rides = None
            for ride in rides:
                ride.done.set()

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        rides = self._carrying(config)
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        finally:
            self._landed(rides)

    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        rides = self._carrying(config)
        try:
            super().put_writes(config, writes, task_id, task_path)
        finally:
            self._landed(rides)


__all__ = ["JournalingPostgresSaver", "Ride"]
