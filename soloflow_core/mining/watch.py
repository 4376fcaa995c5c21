"""Watching a namespace as runs arrive: cheap check per run, full detection only when due."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from soloflow_core.mining.incremental import IncrementalDetector
from soloflow_core.models import DetectorConfig, FlowCandidate, TaskRun

if TYPE_CHECKING:
    from soloflow_core.store import Store

log = logging.getLogger(__name__)


class DetectionWatcher:
    """After each stored run, ask the incremental detector whether a new candidate may exist
    (O(run length)); if so, run the full detector for that namespace on a background thread
    and store its candidates (pending, for a person or the promotion policy to decide).

    Attributes:
        proposed: every candidate proposed so far, oldest first.
    """

    def __init__(
        self, store: Store, config: DetectorConfig | None = None, *, background: bool = True
    ) -> None:
        self.store = store
        self.config = config or DetectorConfig()
        self.background = background
        self.incremental = IncrementalDetector(
            min_length=self.config.min_sequence_length, min_occurrences=self.config.min_occurrences
        )
        self.proposed: list[FlowCandidate] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def observe(self, run: TaskRun) -> bool:
        """Count ``run``; return True when a full detection was started for its namespace."""
        ns = (run.user_id, run.agent_id)
        counted = self.config.include_failed_runs or run.success is not False
        if not self.incremental.is_warm(*ns):
            seqs = (
                s.names
                for s in self.store.iter_sequences(user_id=ns[0], agent_id=ns[1])
                if self.config.include_failed_runs or s.success is not False
            )
            self.incremental.warm(
                *ns, seqs, self.store.decided_dedupe_keys(user_id=ns[0], agent_id=ns[1])
            )
            fresh = True  # the warm-up already counted this run: let the full detector decide
        elif not counted:
            return False  # a failed run is no evidence for a workflow (DetectorConfig)
        else:
            fresh = bool(self.incremental.add_run(*ns, run.tool_names))
        if not fresh:
            return False
        if self.background:
            t = threading.Thread(target=self._detect, args=ns, daemon=True, name="soloflow-detect")
            t.start()  # before it is listed: wait() never joins a thread not started
            with self._lock:
                self._threads.append(t)
        else:
            self._detect(*ns)
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background detections started so far."""
        with self._lock:
            threads, self._threads = self._threads, []
        for t in threads:
            t.join(timeout)

    def _detect(self, user_id: str, agent_id: str) -> None:
        from soloflow_core.mining.detector import detect_candidates

        try:
            cands = detect_candidates(
                self.store, user_id=user_id, agent_id=agent_id, config=self.config
            )
        except Exception:
            log.exception("SoloFlow: background detection failed for %s/%s", user_id, agent_id)
            return
        self.incremental.mark_known(user_id, agent_id, [c.dedupe_key for c in cands])
        with self._lock:
            known = {c.id for c in self.proposed}
            self.proposed.extend(c for c in cands if c.id not in known)
