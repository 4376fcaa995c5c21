"""What the flow runtime (:mod:`soloflow_langgraph.runtime.flow_runtime`) needs around its runs: who owns
a run (``host:pid``), the default LangGraph checkpointer for a store, deleting a run's
checkpoints, and the journal work done when a run is resumed or ends early.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
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


def default_checkpointer(store: Store | None) -> Any:
    """LangGraph's checkpointer for ``store``'s database (see the module docstring)."""
    from langgraph.checkpoint.memory import InMemorySaver

    if store is None:
        return InMemorySaver()
    url = store.engine.url
    if url.get_backend_name() == "sqlite":
        db = url.database
        if not db or db == ":memory:":
            return InMemorySaver()
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = Path(db)
        ckpt = path.with_name(f"{path.stem}-checkpoints{path.suffix or '.db'}")
        conn = sqlite3.connect(str(ckpt), check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        saver = SqliteSaver(conn)
        saver.setup()
        saver.soloflow_close = conn.close  # type: ignore[attr-defined]
        return saver
    if url.get_backend_name() == "postgresql":
        import psycopg
        from psycopg.rows import dict_row

        from soloflow_langgraph.runtime.savers import JournalingPostgresSaver

        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        pg = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        # LangGraph's PostgresSaver, set up as PostgresSaver.from_conn_string sets it up; it
        # also carries the step journal's writes in its own transactions (runtime.savers).
        saver_pg = JournalingPostgresSaver(pg)  # type: ignore[arg-type]
        saver_pg.setup()
        saver_pg.soloflow_close = pg.close  # type: ignore[attr-defined]
        return saver_pg
    raise SoloFlowError(f"no LangGraph checkpointer for a {url.get_backend_name()!r} store; "
                        "pass checkpointer= to FlowRuntime")


NOT_CALLED = "the run stopped before this step, begun ahead, was called"
"""The detail of a step recorded ``skipped`` because its run ended after the journal had
begun it ahead (``StepJournal.begin_ahead``) and before its node ran."""

RETENTION_LINGER = 0.5
"""Seconds the retention thread waits to gather ended runs into one deletion."""
RETENTION_BATCH = 500


def delete_checkpoints(checkpointer: Any, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint and write of ``thread_ids`` in one transaction where the
    checkpointer allows it: ``PostgresSaver.prune(strategy="delete")``; on a ``SqliteSaver``
    the two statements of its own ``delete_thread`` over all the threads; otherwise
    ``delete_thread`` per thread."""
    ids = [str(t) for t in thread_ids]
    if not ids:
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    if isinstance(checkpointer, SqliteSaver):
        for at in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[at:at + 500]
            marks = ", ".join("?" * len(chunk))
            with checkpointer.cursor() as cur:
                cur.execute(f"DELETE FROM checkpoints WHERE thread_id IN ({marks})", chunk)
                cur.execute(f"DELETE FROM writes WHERE thread_id IN ({marks})", chunk)
        return
    prune = getattr(checkpointer, "prune", None)
    if len(ids) > 1 and prune is not None and type(checkpointer).__name__ == "PostgresSaver":
        try:
            prune(ids, strategy="delete")
            return
        except NotImplementedError:  # a langgraph-checkpoint-postgres without prune()
            pass
    for tid in ids:
        checkpointer.delete_thread(tid)


def recover_completions(rec: FlowRunRecord, snapshot: Any, journal: StepJournal) -> None:
    """Steps the journal has ``running`` whose output the checkpoint holds: their call
    returned before the process ended, but the completion was not yet written (held for the
    next write). LangGraph will not run them again, so record them completed now."""
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


def skip_rest(rec: FlowRunRecord, journal: StepJournal, reason: str, exclude: str | None = None) -> None:
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


def handoff_text(flow: FlowDefinition, halt: dict[str, Any], results: dict[str, Any],
                 errors: dict[str, str]) -> str:
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


__all__ = ["NOT_CALLED", "RETENTION_BATCH", "RETENTION_LINGER", "default_checkpointer", "delete_checkpoints",
           "handoff_text", "owner_alive", "process_owner", "recover_completions", "skip_rest"]
