"""What happens to a flow run's LangGraph checkpoints when it ends (:data:`Retention`).

``"delete_on_finish"`` (the default): they are deleted — in batches on a background thread
when the runtime opened its checkpointer (one commit per batch instead of per run, on a
second connection so running flows never wait behind a deletion; ``close()`` waits for what
is queued), at once with a checkpointer the caller passed in. ``"keep"``: they stay until
:meth:`~soloflow_langgraph.runtime.flow_runtime.FlowRuntime.prune` removes them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Literal

from soloflow_langgraph.runtime.support import (
    RETENTION_BATCH,
    RETENTION_LINGER,
    OwnedCheckpointer,
    delete_checkpoints,
    open_checkpointer,
)

if TYPE_CHECKING:
    from soloflow_core.store import Store

__all__ = ["CheckpointRetention", "Retention"]

log = logging.getLogger(__name__)

Retention = Literal["delete_on_finish", "keep"]


class CheckpointRetention:
    """Deletes ended runs' checkpoints through ``checkpointer`` as ``retention`` says.

    Args:
        store: the store whose database a second checkpointer is opened on for deletions.
        checkpointer: the runtime's checkpointer.
        owned: the checkpointer the runtime opened itself (None: the caller's, which the
            caller may close at any time, so deletions are done at once).
        retention: the policy.
    """

    def __init__(
        self,
        store: Store | None,
        checkpointer: Any,
        *,
        owned: OwnedCheckpointer | None,
        retention: Retention,
    ) -> None:
        self.store, self.checkpointer, self.owned, self.retention = (
            store,
            checkpointer,
            owned,
            retention,
        )
        self._lock = threading.Lock()
        self._janitor: queue.Queue[str] | None = None
        self._flush = threading.Event()
        self._second: OwnedCheckpointer | None = None

    def cleanup(self, run_id: str) -> None:
        """Let the ended run's checkpoints go (queued, or at once; see the module)."""
        if self.retention != "delete_on_finish":
            return
        if getattr(self.checkpointer, "delete_thread", None) is None:
            return
        if self.owned is None:
            self._delete([run_id])
            return
        with self._lock:
            if self._janitor is None:
                self._janitor = queue.Queue()
                threading.Thread(
                    target=self._janitor_loop,
                    args=(self._janitor,),
                    name="soloflow-retention",
                    daemon=True,
                ).start()
        self._janitor.put(run_id)

    def close(self) -> None:
        """Delete what is queued now, wait for it, and close the second connection."""
        if self._janitor is not None:
            self._flush.set()  # no more lingering
            self._janitor.join()
            self._flush.clear()
        if self._second is not None:
            self._second.close()

    def _janitor_loop(self, jobs: queue.Queue[str]) -> None:
        """Deletes ended runs' checkpoints in batches: after the first of a batch arrives it
        waits up to ``RETENTION_LINGER`` seconds (less once ``close()`` asks) for more, then
        deletes them all in one transaction — one commit (and on SQLite one fsync) per batch
        instead of per run, which runs still writing checkpoints would otherwise queue behind."""
        while True:
            batch = [jobs.get()]
            deadline = time.monotonic() + RETENTION_LINGER
            while len(batch) < RETENTION_BATCH and not self._flush.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(jobs.get(timeout=min(left, 0.05)))
                except queue.Empty:
                    continue
            try:
                self._delete(batch, background=True)
            finally:
                for _ in batch:
                    jobs.task_done()

    def _delete(self, run_ids: list[str], *, background: bool = False) -> None:
        try:
            delete_checkpoints(self._deleter() if background else self.checkpointer, run_ids)
        except Exception:  # retention must never fail a run
            log.exception("could not delete the checkpoints of flow runs %s", ", ".join(run_ids))

    def _deleter(self) -> Any:
        """The checkpointer the retention thread deletes through: a second one on the same
        database with its own connection, so running flows never wait for a deletion behind
        their checkpointer's connection lock."""
        if self.owned is None or not self.owned.connected:
            return self.checkpointer
        if self._second is None:
            self._second = open_checkpointer(self.store)
        return self._second.saver
