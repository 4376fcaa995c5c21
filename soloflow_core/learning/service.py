"""The learning service: finished runs become candidates and flows; flow runs teach confidence.

:class:`LearningService` wires the pure policy of :mod:`soloflow_core.learning` to the
store, the detector and promotion:

1. **after each captured run** (:meth:`LearningService.on_run_finished`, within
   ``learning_timeout``): every registered flow whose sequence the run did itself is credited
   (:func:`~soloflow_core.learning.records.record_agent_run`: its task becomes evidence of
   the flow's job and a success in its confidence); then :func:`should_learn` → the incremental check of
   :class:`~soloflow_core.mining.watch.DetectionWatcher` (a full detection only when a new
   candidate may exist) → each new candidate stored pending → verified by replay when a
   ``verify`` callable is given (the LangChain adapter injects
   ``soloflow_langgraph.verify.verify_candidate``) → :func:`promotion_route` by
   ``suggestion_mode``: ``"auto"`` promotes with
   :func:`~soloflow_core.learning.promotion.auto_promote_candidate` (``soloflow_flow_promoted``
   fires), ``"manual"`` leaves it pending for ``soloflow flows approve`` / ``reject``. A
   rejected ``dedupe_key`` is never proposed again (the detector skips decided keys);
2. **after each flow execution** (the flow runtime records it itself:
   :func:`~soloflow_core.learning.records.record_flow_outcome`; :meth:`record_outcome` is the
   same for a caller's own runs): the flow's counts, Beta-posterior confidence and status in
   the store (demoted to ``suggestion_only`` below ``min_success_rate``, retired after more
   failures);
3. **savings** (:meth:`LearningService.savings`): :mod:`soloflow_core.learning.savings`.

The service is also a plugin: ``pm.register(service)`` and every run the capture handler
stores reaches it through ``soloflow_run_finished``. Reference: ``docs/agents.md``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from soloflow_core._markers import hookimpl
from soloflow_core.errors import SoloFlowError
from soloflow_core.generalize.dataflow import side_effects_from_calls
from soloflow_core.learning.config import LearningConfig
from soloflow_core.learning.outcomes import DEFAULT_PROMOTION_THRESHOLD, FlowStats, promotion_route
from soloflow_core.learning.promotion import auto_promote_candidate
from soloflow_core.learning.records import flow_stats, record_agent_run, record_flow_outcome
from soloflow_core.learning.savings import FlowSavings, measure_flow_savings
from soloflow_core.learning.triggers import (
    LearningAttempt,
    LearningDecision,
    run_learning,
    should_learn,
)
from soloflow_core.mining.watch import DetectionWatcher
from soloflow_core.models import DetectorConfig, FlowCandidate, FlowDefinition, TaskRun

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.store import Store

__all__ = ["FlowOutcome", "LearningOutcome", "LearningService", "VerifyCandidate"]

log = logging.getLogger(__name__)

VerifyCandidate = Callable[[FlowCandidate], FlowCandidate]
"""Replays a stored candidate and returns it with ``fidelity`` and ``confidence`` set (and
stored). The LangChain adapter passes one built on ``soloflow_langgraph.verify``."""

_COUNTED = {"completed": True, "failed": False, "fallback": False}
"""Flow-run statuses that are outcomes; ``cancelled`` (a person's act) and ``waiting`` are not."""


class FlowOutcome(Protocol):
    """What :meth:`LearningService.record_result` reads of a flow run's result
    (``soloflow_langgraph.runtime.runner.FlowRunResult`` has it)."""

    @property
    def flow(self) -> str: ...
    @property
    def status(self) -> str: ...


@dataclass(frozen=True, slots=True)
class LearningOutcome:
    """What one finished run taught."""

    run_id: str
    decision: LearningDecision
    """Whether the run could teach at all, and why not."""
    proposed: tuple[FlowCandidate, ...] = ()
    """New candidates (after verification, when a ``verify`` callable is set)."""
    promoted: tuple[FlowDefinition, ...] = ()
    """Flows registered without a person (``suggestion_mode`` automatic or hybrid)."""
    pending: tuple[str, ...] = ()
    """Candidate ids left for a person to approve or reject."""
    credited: tuple[str, ...] = ()
    """Registered flows whose sequence the run did itself (:func:`record_agent_run`)."""
    notes: tuple[str, ...] = ()


class LearningService:
    """Learning for every (user, agent) namespace of one store.

    Args:
        store: where runs, candidates and flows live.
        config: the learning settings (default: ``LearningConfig()``).
        pm: its ``soloflow_flow_promoted`` hears automatic promotions.
        verify: replays a candidate before promotion; without it no candidate has a
            fidelity, so ``automatic``/``hybrid`` leave every candidate to a person.
        detector: the detector's settings; ``min_sequence_length`` defaults to
            ``config.min_steps_to_learn``.
        side_effects: tool → whether it changes the world (``False``: read-only), for
            ``hybrid``; tools not named are read from the recorded calls' metadata
            (``read_only``/``side_effects``), else assumed to have side effects.
        fidelity_threshold: the replay fidelity automatic promotion needs.
    """

    def __init__(
        self,
        store: Store,
        config: LearningConfig | None = None,
        pm: pluggy.PluginManager | None = None,
        *,
        verify: VerifyCandidate | None = None,
        detector: DetectorConfig | None = None,
        side_effects: Mapping[str, bool] | None = None,
        fidelity_threshold: float = DEFAULT_PROMOTION_THRESHOLD,
    ) -> None:
        self.store = store
        self.config = config or LearningConfig()
        self.pm = pm
        self.verify = verify
        self.side_effects = dict(side_effects or {})
        self.fidelity_threshold = fidelity_threshold
        if detector is None:
            detector = DetectorConfig(
                min_sequence_length=self.config.min_steps_to_learn,
                side_effects=self.side_effects,
            )
        self.watcher = DetectionWatcher(store, detector, background=False)
        self._attempts: list[Future[LearningOutcome]] = []
        self._lock = threading.Lock()  # one learning step and one outcome write at a time

    # ------------------------------------------------------------------ runs → flows

    @hookimpl
    def soloflow_run_finished(self, run: TaskRun) -> None:
        """The plugin face of :meth:`on_run_finished`."""
        self.on_run_finished(run)

    def on_run_finished(self, run: TaskRun) -> LearningAttempt[LearningOutcome]:
        """Learn from a stored run, waiting at most ``learning_timeout`` (see
        :func:`run_learning`: past it the step goes on in the background; :meth:`wait`)."""
        attempt = run_learning(lambda: self.learn(run), self.config)
        if attempt.status == "timed_out":
            with self._lock:
                self._attempts.append(attempt.future)
        return attempt

    def wait(self, timeout: float | None = None) -> None:
        """Wait for learning steps that outlived ``learning_timeout``."""
        with self._lock:
            pending, self._attempts = self._attempts, []
        for future in pending:
            try:
                future.result(timeout)
            except Exception:  # already logged by run_learning's worker
                log.debug("a background learning step failed", exc_info=True)

    def learn(self, run: TaskRun) -> LearningOutcome:
        """The learning step itself, synchronously (what :meth:`on_run_finished` times)."""
        decision = should_learn(run, self.config)
        credited: tuple[str, ...] = ()
        if self.config.enabled:
            try:
                credited = tuple(record_agent_run(self.store, run))
            except SoloFlowError:
                log.exception("SoloFlow: crediting flows with run %s failed", run.run_id)
        if not decision:
            return LearningOutcome(run.run_id, decision, credited=credited)
        with self._lock:
            before = len(self.watcher.proposed)
            self.watcher.observe(run)
            fresh = [
                c
                for c in self.watcher.proposed[before:]
                if c.user_id == run.user_id and c.agent_id == run.agent_id
            ]
            proposed, promoted, pending, notes = [], [], [], []
            for cand in fresh:
                cand, flow, note = self._decide(cand)
                proposed.append(cand)
                if flow is not None:
                    promoted.append(flow)
                else:
                    pending.append(cand.id)
                if note:
                    notes.append(note)
        return LearningOutcome(
            run.run_id,
            decision,
            proposed=tuple(proposed),
            promoted=tuple(promoted),
            pending=tuple(pending),
            credited=credited,
            notes=tuple(notes),
        )

    def is_read_only(self, cand: FlowCandidate) -> bool:
        """Whether every step of the candidate's flow is known not to change the world."""
        known = dict(self.side_effects)
        unknown = {s.skill_key for s in cand.proposed_flow.steps if s.skill_key not in known}
        if unknown:
            runs = self.store.load_runs(
                cand.run_ids[:20], user_id=cand.user_id, agent_id=cand.agent_id
            )
            recorded = side_effects_from_calls([c for r in runs for c in r.tool_calls])
            known.update({k: v for k, v in recorded.items() if k not in known})
        return all(
            step.side_effects is False
            or (step.side_effects is None and known.get(step.skill_key) is False)
            for step in cand.proposed_flow.steps
        )

    def _decide(self, cand: FlowCandidate) -> tuple[FlowCandidate, FlowDefinition | None, str]:
        """Verify the candidate, then promote it or leave it to a person."""
        if self.verify is not None:
            try:
                cand = self.verify(cand)
            except Exception as exc:  # a broken replay leaves the decision to a person
                log.exception("SoloFlow: verifying candidate %s failed", cand.id)
                return cand, None, f"{cand.id}: verification failed ({type(exc).__name__}: {exc})"
        mode = self.config.suggestion_mode
        read_only = mode == "hybrid" and self.is_read_only(cand)
        route = promotion_route(
            mode,
            read_only,
            confidence=cand.confidence,
            fidelity=cand.fidelity,
            config=self.config,
            fidelity_threshold=self.fidelity_threshold,
        )
        if route == "manual":
            why = {
                "manual": "suggestion_mode=manual",
                "hybrid": "the flow has side effects" if not read_only else "below the thresholds",
                "automatic": "below the thresholds",
            }[mode]
            return cand, None, f"{cand.id}: left for a person ({why})"
        try:
            flow = auto_promote_candidate(
                self.store,
                cand.id,
                user_id=cand.user_id,
                agent_id=cand.agent_id,
                threshold=self.fidelity_threshold,
                pm=self.pm,
                config=self.config,
            )
        except SoloFlowError as exc:
            return cand, None, f"{cand.id}: not promoted ({exc})"
        return cand, flow, f"{cand.id}: promoted to flow {flow.name!r} version {flow.version}"

    # ------------------------------------------------------------------ outcomes

    def stats(self, user_id: str, agent_id: str, name: str) -> FlowStats:
        """The flow's outcome record (latest version), rebuilt from the store
        (:func:`~soloflow_core.learning.records.flow_stats`).

        Raises:
            NotFoundError: no such flow in the namespace.
        """
        return flow_stats(self.store, name, user_id=user_id, agent_id=agent_id)

    def record_outcome(
        self, user_id: str, agent_id: str, name: str, *, success: bool, at: datetime | None = None
    ) -> FlowStats:
        """Count one execution of the flow ``name`` and store its new confidence and status
        (:func:`~soloflow_core.learning.records.record_flow_outcome`).

        Raises:
            NotFoundError: no such flow in the namespace.
        """
        return record_flow_outcome(
            self.store,
            name,
            success=success,
            user_id=user_id,
            agent_id=agent_id,
            config=self.config,
            at=at,
        )

    def record_result(
        self, result: FlowOutcome, *, user_id: str, agent_id: str
    ) -> FlowStats | None:
        """:meth:`record_outcome` from a flow run's result: ``completed`` is a success,
        ``failed`` and ``fallback`` are failures; ``cancelled`` and ``waiting`` are not
        outcomes (None)."""
        success = _COUNTED.get(result.status)
        if success is None:
            return None
        return self.record_outcome(user_id, agent_id, result.flow, success=success)

    # ------------------------------------------------------------------ savings

    def savings(
        self, user_id: str, agent_id: str, names: Iterable[str] | None = None
    ) -> list[FlowSavings]:
        """The savings ledger of the namespace's flows (``names``: only these), by name."""
        return flow_savings(self.store, user_id, agent_id, names=names)


def flow_savings(
    store: Store, user_id: str, agent_id: str, names: Iterable[str] | None = None
) -> list[FlowSavings]:
    """:meth:`LearningService.savings` without a service (the CLI reads it this way).

    Raises:
        NotFoundError: a flow of ``names`` is not in the namespace.
    """
    if names is None:
        metas = store.list_flow_meta(user_id=user_id, agent_id=agent_id)
    else:
        metas = [store.get_flow_meta(n, user_id=user_id, agent_id=agent_id) for n in names]
    return [measure_flow_savings(store, m, user_id=user_id, agent_id=agent_id) for m in metas]


__all__ += ["flow_savings"]
