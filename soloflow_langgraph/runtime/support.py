"""What the flow runtime (:mod:`soloflow_langgraph.runtime.flow_runtime`) needs around its runs: who owns
a run (``host:pid``), the LangGraph checkpointer opened for a store (:class:`OwnedCheckpointer`),
deleting a run's checkpoints, and the journal work done when a run is resumed or ends early.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import SoloFlowError
from soloflow_core.flow.journal import StepJournal
from soloflow_core.models import FlowDefinition

if TYPE_CHECKING:
    from soloflow_core.store import Store
    from soloflow_core.store.flowruns import FlowRunRecord


def process_owner() -> str:
    """``host:pid`` of this process: who runs a flow run."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process ``owner`` still runs (None: on another host, cannot tell)."""
    if not owner or ":" not in owner:
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OwnedCheckpointer:
    """A LangGraph checkpointer opened on a store's database, with the connection under it.
    Whoever opens one closes it (:meth:`close`, or a ``with`` block); the checkpointer is
    LangGraph's own class, set up through its public constructors.

    Example::

        with open_checkpointer(store) as owned:
            graph = compile_flow(flow, checkpointer=owned.saver)
    """

    def __init__(self, saver: Any, stack: contextlib.ExitStack | None = None) -> None:
        self.saver = saver
        """The checkpointer: ``SqliteSaver``, ``PostgresSaver`` or ``InMemorySaver``."""
        self._stack = stack

    @property
    def connected(self) -> bool:
        """Whether it holds a database connection (a second one may be opened beside it)."""
        return self._stack is not None

    def close(self) -> None:
        """Close the connection it was opened on (idempotent)."""
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()

    def __enter__(self) -> OwnedCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set_up(saver: Any, *, tries: int = 20) -> None:
    """``saver.setup()``, tried again while another process holds the file: its script
    (``PRAGMA journal_mode=WAL``, ``CREATE TABLE IF NOT EXISTS``) can meet "database is
    locked" at once, past the busy timeout, when two processes open one file together."""
    for attempt in range(tries):
        try:
            saver.setup()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def open_checkpointer(store: Store | None) -> OwnedCheckpointer:
    """LangGraph's checkpointer for ``store``'s database: ``SqliteSaver`` on a file next to a
    SQLite file store, ``PostgresSaver`` in a PostgreSQL store's database (connected as
    ``PostgresSaver.from_conn_string`` connects), ``InMemorySaver`` otherwise."""
    from langgraph.checkpoint.memory import InMemorySaver

    if store is None:
        return OwnedCheckpointer(InMemorySaver())
    url = store.engine.url
    if url.get_backend_name() == "sqlite":
        db = url.database
        if not db or db == ":memory:":
            return OwnedCheckpointer(InMemorySaver())
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = Path(db)
        ckpt = path.with_name(f"{path.stem}-checkpoints{path.suffix or '.db'}")
        stack = contextlib.ExitStack()
        conn = stack.enter_context(
            contextlib.closing(sqlite3.connect(str(ckpt), check_same_thread=False))
        )
        conn.execute("PRAGMA busy_timeout = 30000")
        saver = SqliteSaver(conn)
        _set_up(saver)
        return OwnedCheckpointer(saver, stack)
    if url.get_backend_name() == "postgresql":
        from langgraph.checkpoint.postgres import PostgresSaver

        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        stack = contextlib.ExitStack()
        saver_pg = stack.enter_context(PostgresSaver.from_conn_string(dsn))
        try:
            saver_pg.setup()
        except BaseException:
            stack.close()
            raise
        return OwnedCheckpointer(saver_pg, stack)
    raise SoloFlowError(
        f"no LangGraph checkpointer for a {url.get_backend_name()!r} store; "
        "pass checkpointer= to FlowRuntime"
    )


RETENTION_LINGER = 0.5
"""Seconds the retention thread waits to gather ended runs into one deletion."""
RETENTION_BATCH = 500


def delete_checkpoints(checkpointer: Any, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint and write of ``thread_ids`` through the checkpointer's public
    API: ``prune(thread_ids, strategy="delete")`` (one transaction on ``PostgresSaver``) where
    the checkpointer implements it, else ``delete_thread`` per thread."""
    ids = [str(t) for t in thread_ids]
    if not ids:
        return
    if len(ids) > 1:
        try:
            checkpointer.prune(ids, strategy="delete")
            return
        except NotImplementedError:  # BaseCheckpointSaver's default: not implemented by this saver
            pass
    for tid in ids:
        checkpointer.delete_thread(tid)


def recover_completions(rec: FlowRunRecord, snapshot: Any, journal: StepJournal) -> None:
    """Steps the journal has ``running`` whose output the checkpoint holds: their call
    returned before the process ended, but the completion was not yet written (deferred to
    the next write). LangGraph will not run them again, so record them completed now."""
    running = {s.step_key for s in rec.steps if s.state == "running"}
    if not running:
        return
    found: dict[str, Any] = {}

    def collect(update: Any) -> None:
        if not isinstance(update, dict):
            return
        for sid, out in (update.get("results") or {}).items():
            found[sid] = out
        for sid, parts in (update.get("map_parts") or {}).items():
            for index, out in (parts or {}).items():
                found[f"{sid}[{index}]"] = out

    collect(snapshot.values)
    for task in snapshot.tasks or ():
        collect(getattr(task, "result", None))
    for key in sorted(running & found.keys()):
        journal.recovered(key, found[key])


def skip_rest(
    rec: FlowRunRecord, journal: StepJournal, reason: str, exclude: str | None = None
) -> None:
    """Record as skipped every step of an ending run that did not finish (those never
    started included, from the definition the run started with)."""
    seen = {s.step_key: s for s in rec.steps}
    for s in rec.steps:
        if s.state in ("pending", "ready", "running") and s.step_key != exclude:
            journal.skipped(s.step_key, s.step_id, reason)
    for step in (rec.definition or {}).get("steps") or []:
        sid = step.get("id")
        if sid and sid not in seen:
            journal.skipped(sid, sid, reason)


def handoff_text(
    flow: FlowDefinition, halt: dict[str, Any], *, results: dict[str, Any], errors: dict[str, str]
) -> str:
    """What an agent is told when a flow hands a task back (``on_failure="fallback"``)."""
    done = [s.id for s in flow.steps if s.id in results]
    todo = [s.id for s in flow.steps if s.id not in results and s.id != halt.get("step")]
    partial = json.dumps({k: results[k] for k in done}, default=str, ensure_ascii=False)
    if len(partial) > 4000:
        partial = partial[:4000] + "…"
    return (
        f"The deterministic flow {flow.name!r} could not finish: step {halt.get('step')!r} failed "
        f"({halt.get('error')}). Completed steps: {', '.join(done) or 'none'}. "
        f"Not run: {', '.join(todo) or 'none'}. Partial results: {partial}. "
        "Carry on with the task from here yourself."
    )


__all__ = [
    "RETENTION_BATCH",
    "RETENTION_LINGER",
    "OwnedCheckpointer",
    "delete_checkpoints",
    "handoff_text",
    "open_checkpointer",
    "owner_alive",
    "process_owner",
    "recover_completions",
    "skip_rest",
]
