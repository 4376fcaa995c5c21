"""What the REST API and the MCP server do, once: every act for a principal, inside its
(user, agent) namespace.

A :class:`~soloflow_langgraph.server.principal.Principal` is who asks: the namespace of an API
token (with its scope) or of the ``--user``/``--agent`` of ``soloflow mcp`` over stdio. Every
method reads and writes only that namespace — an id of another namespace is a
``NotFoundError``, exactly like a missing one — and every method that changes something first
checks the principal's scope (``AccessDeniedError`` for a read-only token).

Flow runs go through :class:`~soloflow_langgraph.runtime.FlowRuntime` (one per namespace,
sharing this service's executors), whose outcomes the learning service records. A run is
driven on a thread of its own (:mod:`soloflow_langgraph.server.driver`); the caller waits for
it at most ``wait`` seconds, then gets its id and status ``running`` while it goes on here
(follow it with its status). When the server stops, :meth:`SoloFlowService.stop_runs` records
the runs still going here ``interrupted``, to be resumed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError
from soloflow_core.flow.effects import tool_side_effects
from soloflow_core.flow.executors import build_executor_registry
from soloflow_core.flow.templates import iter_references
from soloflow_core.learning.outcomes import MIN_HELD_OUT
from soloflow_core.learning.promotion import (
    approve_candidate,
    auto_promote_candidate,
    reject_candidate,
)
from soloflow_core.learning.quality import agent_side, flows_quality, order_ties_by_quality
from soloflow_core.learning.savings import measure_flow_savings
from soloflow_core.learning.service import LearningService
from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE, ProceduralMemory
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.server.driver import DEFAULT_WAIT, RunDriver
from soloflow_langgraph.server.views import (
    CandidateView,
    FindMatchView,
    FlowRunView,
    FlowView,
    Page,
    RunSummaryView,
    SavingsView,
    TaskRunView,
    TokenView,
    TraceView,
    TransitionView,
    VerifyView,
    WorkflowPage,
    WorkflowView,
)

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.learning.quality import AgentSide, QualityScore
    from soloflow_core.models import FlowCandidate, FlowDefinition
    from soloflow_core.store import Store
    from soloflow_core.store.procedural import FlowMeta
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
    from soloflow_langgraph.server.principal import Principal
    from soloflow_langgraph.server.views import RunOutcomeView

__all__ = ["MAX_LIMIT", "SoloFlowService"]

log = logging.getLogger(__name__)

MAX_LIMIT = 500
"""The largest page."""
QUALITY_TTL = 30.0
"""Seconds a flow's quality score is reused while its record (executions, confidence,
status) stays the same; the savings it reads change only with new runs."""


def _stamp(meta: FlowMeta) -> tuple[Any, ...]:
    """What of a flow's record changes its quality score."""
    return (meta.total_executions, meta.success_count, meta.last_used, meta.confidence, meta.status)


def _page(items: list[Any], limit: int, offset: int) -> tuple[list[Any], int | None]:
    """(the page, the next offset) from ``limit + 1`` items read."""
    more = len(items) > limit
    return items[:limit], (offset + limit if more else None)


def _inputs(flow: FlowDefinition) -> list[str]:
    """The flow's input names: its schema's properties, else the inputs its templates read."""
    if flow.input_schema is not None:
        return list((flow.input_schema.get("properties") or {}).keys())
    names: dict[str, None] = {}
    for step in flow.steps:
        for _, ref in iter_references([step.input_map, step.map_over]):
            if not isinstance(ref, Exception) and ref.is_trigger and ref.path:
                names.setdefault(str(ref.path[0]))
    return list(names)


class SoloFlowService:
    """Every act of the REST API and the MCP server, on one store with one set of executors.

    Args:
        store: the caller's; this service does not close it.
        tools: LangChain tools (or callables) flow steps may call, besides the plugins'.
        plugin_manager: default ``get_plugin_manager()``.
        learning: records each run's outcome (confidence, status); default one on ``store``.
    """

    def __init__(
        self,
        store: Store,
        *,
        tools: Sequence[Any] = (),
        plugin_manager: pluggy.PluginManager | None = None,
        learning: LearningService | None = None,
    ) -> None:
        self.store = store
        self.pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
        self.registry = build_executor_registry(self.pm, tools=tools)
        self.side_effects = tool_side_effects(tools)
        """What the tools' metadata says of their side effects (replay verification)."""
        self.learning = learning if learning is not None else LearningService(store, pm=self.pm)
        self.memory = ProceduralMemory(store, pm=self.pm)
        self._runtimes: dict[tuple[str, str], FlowRuntime] = {}
        self._definitions: dict[tuple[str, str, str, int], FlowDefinition] = {}
        self._quality: dict[
            tuple[str, str, str, int], tuple[tuple[Any, ...], float, QualityScore]
        ] = {}
        self._agent_sides: dict[tuple[str, int], AgentSide] = {}
        self._driver = RunDriver()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str, str], None]] = []

    def close(self) -> None:
        """Wait (a while) for runs still going on this service's threads, stop those still
        going then (:meth:`stop_runs`), and close the runtimes."""
        self._driver.join()
        self.stop_runs()
        with self._lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        for runtime in runtimes:
            runtime.close()

    def stop_runs(self) -> list[str]:
        """For a server that stops: stop the flow runs this service drives that are still going,
        as Ctrl-C stops ``soloflow flows run`` (the call in progress is abandoned), and record
        each ``interrupted``, which ``soloflow flows resume`` (or the resume route) carries on.
        Each is logged; the ids recorded."""
        with self._lock:
            runtimes = list(self._runtimes.items())
        stopped = []
        for (user, agent), runtime in runtimes:
            for run_id in runtime.interrupt_running():
                log.warning(
                    "flow run %s (user %r, agent %r) stopped with the server and recorded "
                    "interrupted; resume it with: soloflow flows resume %s",
                    run_id,
                    user,
                    agent,
                    run_id,
                )
                stopped.append(run_id)
        return stopped

    # ------------------------------------------------------------------ changes

    def on_flows_changed(self, listener: Callable[[str, str], None]) -> None:
        """Call ``listener(user_id, agent_id)`` when this service registers or changes a
        namespace's flows (submit, approve, promote); the MCP server tells its clients."""
        self._listeners.append(listener)

    def _changed(self, p: Principal) -> None:
        for listener in list(self._listeners):
            try:
                listener(p.user_id, p.agent_id)
            except Exception:  # a listener must never undo what was stored
                log.exception("a flows-changed listener failed")

    # ------------------------------------------------------------------ flows

    def definition(self, p: Principal, name: str, version: int) -> FlowDefinition:
        key = (p.user_id, p.agent_id, name, version)
        hit = self._definitions.get(key)
        if hit is None:
            hit = self.store.get_flow(name, version=version, **p.ns).flow
            self._definitions[key] = hit
        return hit

    def definitions(self, p: Principal, metas: Sequence[FlowMeta]) -> None:
        """Read the definitions of ``metas`` not read yet, in one statement."""
        missing = [
            (m.name, m.version)
            for m in metas
            if (p.user_id, p.agent_id, m.name, m.version) not in self._definitions
        ]
        if missing:
            for (name, version), flow in self.store.flow_definitions(missing, **p.ns).items():
                self._definitions[(p.user_id, p.agent_id, name, version)] = flow

    def qualities(
        self, p: Principal, metas: Sequence[FlowMeta]
    ) -> dict[tuple[str, int], QualityScore]:
        """The flow versions' quality scores, by (name, version): measured together
        (:func:`~soloflow_core.learning.quality.flows_quality`), each reused for
        :data:`QUALITY_TTL` seconds while its record (executions, confidence, status) is unchanged."""
        now = time.monotonic()
        out: dict[tuple[str, int], QualityScore] = {}
        stale: list[FlowMeta] = []
        for meta in metas:
            hit = self._quality.get((p.user_id, p.agent_id, meta.name, meta.version))
            if hit is not None and hit[0] == _stamp(meta) and now - hit[1] < QUALITY_TTL:
                out[(meta.name, meta.version)] = hit[2]
            else:
                stale.append(meta)
        if stale:
            fresh = flows_quality(self.store, stale, agent_side_of=self._agent_side, **p.ns)
            for meta in stale:
                score = out[(meta.name, meta.version)] = fresh[(meta.name, meta.version)]
                self._quality[(p.user_id, p.agent_id, meta.name, meta.version)] = (
                    _stamp(meta),
                    now,
                    score,
                )
        return out

    def quality(self, p: Principal, meta: FlowMeta) -> QualityScore:
        return self.qualities(p, [meta])[(meta.name, meta.version)]

    def _agent_side(self, cand: FlowCandidate) -> AgentSide:
        """A candidate's agent runs, measured once (they do not change once it is decided)."""
        key = (cand.id, len(cand.run_ids))
        hit = self._agent_sides.get(key)
        if hit is None:
            hit = self._agent_sides[key] = agent_side(self.store, cand)
        return hit

    def workflow_view(
        self, p: Principal, meta: FlowMeta, quality: QualityScore | None = None
    ) -> WorkflowView:
        flow = self.definition(p, meta.name, meta.version)
        return WorkflowView.of(meta, _inputs(flow), quality)

    def list_workflows(
        self,
        p: Principal,
        *,
        limit: int = 50,
        offset: int = 0,
        quality: bool = True,
        include_retired: bool = True,
    ) -> WorkflowPage:
        """The namespace's flows (latest version of each), by name, one page."""
        metas = self.store.list_flow_meta(
            include_retired=include_retired, limit=limit + 1, offset=offset, **p.ns
        )
        page, next_offset = _page(metas, limit, offset)
        self.definitions(p, page)
        scores = self.qualities(p, page) if quality else {}
        return WorkflowPage(
            workflows=[self.workflow_view(p, m, scores.get((m.name, m.version))) for m in page],
            limit=limit,
            offset=offset,
            next_offset=next_offset,
        )

    def active_flows(self, p: Principal) -> list[tuple[FlowMeta, FlowDefinition]]:
        """The namespace's active flows (latest versions), by name, with their definitions."""
        metas = [
            m
            for m in self.store.list_flow_meta(include_retired=False, **p.ns)
            if m.status == "active"
        ]
        self.definitions(p, metas)
        return [(m, self.definition(p, m.name, m.version)) for m in metas]

    def submit_workflow(
        self,
        p: Principal,
        workflow: Mapping[str, Any] | FlowDefinition,
        *,
        trigger_keywords: Sequence[str] | None = None,
    ) -> WorkflowView:
        """Validate a person's flow like ``soloflow flows submit`` (every problem with its field
        path; every ``skill_key`` one of the executors) and register it, user-submitted."""
        p.require("write", "submit a workflow")
        flow = self.memory.submit_workflow(
            p.user_id,
            p.agent_id,
            workflow,
            trigger_keywords=trigger_keywords,
            executors=self.registry.keys(),
        )
        self._changed(p)
        return self._view_with_quality(p, flow.name, flow.version)

    def _view_with_quality(
        self, p: Principal, name: str, version: int | None = None
    ) -> WorkflowView:
        meta = self.store.get_flow_meta(name, version=version, **p.ns)
        return self.workflow_view(p, meta, self.quality(p, meta))

    def show_flow(self, p: Principal, name: str, version: int | None = None) -> FlowView:
        from soloflow_langgraph.compile.graph import flow_mermaid

        meta = self.store.get_flow_meta(name, version=version, **p.ns)
        flow = self.definition(p, name, meta.version)
        return FlowView(
            workflow=self.workflow_view(p, meta, self.quality(p, meta)),
            definition=flow.model_dump(mode="json"),
            mermaid=flow_mermaid(flow),
        )

    def flow_versions(
        self, p: Principal, name: str, *, limit: int = 50, offset: int = 0
    ) -> Page[WorkflowView]:
        """Every stored version of the flow, newest first, one page."""
        versions = self.store.list_flow_versions(name, **p.ns)
        page, next_offset = _page(versions[offset : offset + limit + 1], limit, offset)
        return Page[WorkflowView](
            items=[self.workflow_view(p, m) for m in page],
            limit=limit,
            offset=offset,
            next_offset=next_offset,
        )

    def flow_stats(self, p: Principal, name: str) -> SavingsView:
        meta = self.store.get_flow_meta(name, **p.ns)
        return SavingsView.of(measure_flow_savings(self.store, meta, **p.ns), self.quality(p, meta))

    def find_flows(
        self,
        p: Principal,
        text: str,
        *,
        tools: Sequence[str] | None = None,
        limit: int = 5,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    ) -> list[FindMatchView]:
        """The flows that fit ``text``, best first; matches whose text scores tie are ordered
        by quality."""
        matches = self.memory.find_workflow(
            p.user_id,
            p.agent_id,
            text,
            available_tools=tools,
            min_confidence=min_confidence,
            limit=limit,
        )
        by_key = self.qualities(
            p, [self.store.get_flow_meta(m.name, version=m.version, **p.ns) for m in matches]
        )
        scores = {name: q for (name, _), q in by_key.items()}
        ordered = order_ties_by_quality(matches, lambda m: scores[m.name].overall)
        return [FindMatchView.of(m, scores[m.name]) for m in ordered]

    # ------------------------------------------------------------------ candidates

    def list_candidates(
        self, p: Principal, *, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[CandidateView]:
        cands = self.store.list_candidates(status=status, limit=limit + 1, offset=offset, **p.ns)
        page, next_offset = _page(cands, limit, offset)
        return Page[CandidateView](
            items=[CandidateView.of(c) for c in page],
            limit=limit,
            offset=offset,
            next_offset=next_offset,
        )

    def candidate(self, p: Principal, candidate_id: str) -> CandidateView:
        return CandidateView.of(self.store.get_candidate(candidate_id, **p.ns))

    def verify_candidate(
        self,
        p: Principal,
        candidate_id: str,
        *,
        threshold: float,
        promote: bool,
        side_effects: Mapping[str, bool] | None = None,
    ) -> VerifyView:
        """Replay the candidate's flow against held-out runs (``soloflow flows verify``); with
        ``promote``, register a pending candidate whose fidelity reaches ``threshold`` over
        at least ``MIN_HELD_OUT`` held-out occurrences. Tools' side effects: ``side_effects``
        over the served tools' metadata (as the middleware passes its tools'), else the
        recorded calls'."""
        from soloflow_langgraph.verify import verify_candidate

        p.require("write", "verify a candidate")
        self.store.get_candidate(candidate_id, **p.ns)  # NotFoundError before any work
        effects = {**self.side_effects, **(side_effects or {})}
        cand, report = verify_candidate(
            self.store, candidate_id, side_effects=effects or None, **p.ns
        )
        promotable = report.passes(threshold) and report.held_out >= MIN_HELD_OUT
        promoted = None
        if promote and cand.status == "pending" and promotable:
            flow = auto_promote_candidate(
                self.store, candidate_id, threshold=threshold, pm=self.pm, **p.ns
            )
            self._changed(p)
            promoted = self._view_with_quality(p, flow.name, flow.version)
        return VerifyView(
            candidate=CandidateView.of(cand),
            passes=report.passes(threshold),
            promotable=promotable,
            threshold=threshold,
            held_out=report.held_out,
            free_inputs=report.free_inputs,
            promoted=promoted,
        )

    def approve_candidate(self, p: Principal, candidate_id: str) -> WorkflowView:
        p.require("write", "approve a candidate")
        flow = approve_candidate(self.store, candidate_id, pm=self.pm, **p.ns)
        self._changed(p)
        return self._view_with_quality(p, flow.name, flow.version)

    def reject_candidate(self, p: Principal, candidate_id: str) -> CandidateView:
        p.require("write", "reject a candidate")
        return CandidateView.of(reject_candidate(self.store, candidate_id, **p.ns))

    # ------------------------------------------------------------------ flow runs

    def runtime(self, p: Principal) -> FlowRuntime:
        """The namespace's flow runtime (made on first use, closed by :meth:`close`)."""
        key = (p.user_id, p.agent_id)
        with self._lock:
            runtime = self._runtimes.get(key)
            if runtime is None:
                from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

                # The runtime records every run's outcome in the flow's record itself.
                runtime = FlowRuntime(
                    self.store,
                    registry=self.registry,
                    plugin_manager=self.pm,
                    learning_config=self.learning.config,
                    **p.ns,
                )
                self._runtimes[key] = runtime
        return runtime

    def start_run(
        self,
        p: Principal,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        task: str | None = None,
        wait: float = DEFAULT_WAIT,
    ) -> RunOutcomeView:
        """Run the flow ``name`` (its latest version) on ``inputs`` (missing ones recovered
        from ``task`` by the flow's extraction rules)."""
        from soloflow_langgraph.runtime.inputs import inputs_from_task

        p.require("write", "run a flow")
        runtime = self.runtime(p)
        flow = runtime.flow(name)  # NotFoundError here, in the caller's thread
        given = dict(inputs or {})
        if task:
            given = {**inputs_from_task(flow, task), **given}
        return self._driver.drive(
            flow.name, lambda on_started: runtime.run(name, given, on_started=on_started), wait
        )

    def run_status(self, p: Principal, run_id: str) -> FlowRunView:
        return FlowRunView.of(self.store.get_flow_run(run_id, **p.ns))

    def run_history(
        self, p: Principal, run_id: str, *, limit: int = 500, offset: int = 0
    ) -> Page[TransitionView]:
        """The run's transitions, oldest first, one page."""
        moves = self.store.flow_run_history(run_id, **p.ns)
        page, next_offset = _page(moves[offset : offset + limit + 1], limit, offset)
        return Page[TransitionView](
            items=[TransitionView.of(m) for m in page],
            limit=limit,
            offset=offset,
            next_offset=next_offset,
        )

    def list_flow_runs(
        self,
        p: Principal,
        *,
        flow: str | None = None,
        state: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Page[FlowRunView]:
        rows = self.store.list_flow_runs(
            flow_name=flow, state=state, limit=limit + 1, offset=offset, **p.ns
        )
        page, next_offset = _page(rows, limit, offset)
        items = [FlowRunView.of(self.store.get_flow_run(r["id"], **p.ns)) for r in page]
        return Page[FlowRunView](items=items, limit=limit, offset=offset, next_offset=next_offset)

    def decide_run(
        self,
        p: Principal,
        run_id: str,
        *,
        approved: bool,
        comment: str | None = None,
        wait: float = DEFAULT_WAIT,
    ) -> RunOutcomeView:
        """Answer a run waiting for approval: it goes on (driven here), or is cancelled."""
        p.require("write", "approve or reject a flow run")
        rec = self.store.get_flow_run(run_id, **p.ns)
        runtime = self.runtime(p)
        return self._driver.drive(
            rec.flow_name,
            lambda _: runtime.approve(run_id, approved=approved, comment=comment),
            wait,
            known_id=run_id,
        )

    def cancel_run(self, p: Principal, run_id: str) -> FlowRunView:
        p.require("write", "cancel a flow run")
        return FlowRunView.of(self.runtime(p).cancel(run_id))

    def resume_run(
        self, p: Principal, run_id: str, *, force: bool = False, wait: float = DEFAULT_WAIT
    ) -> RunOutcomeView:
        p.require("write", "resume a flow run")
        rec = self.store.get_flow_run(run_id, **p.ns)
        runtime = self.runtime(p)
        return self._driver.drive(
            rec.flow_name, lambda _: runtime.resume(run_id, force=force), wait, known_id=run_id
        )

    # ------------------------------------------------------------------ captured runs

    def list_runs(self, p: Principal, *, limit: int = 50, offset: int = 0) -> Page[RunSummaryView]:
        rows = self.store.list_runs(limit=limit + 1, offset=offset, **p.ns)
        page, next_offset = _page(rows, limit, offset)
        return Page[RunSummaryView](
            items=[RunSummaryView.of(r) for r in page],
            limit=limit,
            offset=offset,
            next_offset=next_offset,
        )

    def task_run(self, p: Principal, run_id: str) -> TaskRunView:
        return TaskRunView.of(self.store.get_run(run_id, **p.ns))

    def trace(self, p: Principal, run_id: str) -> TraceView:
        return TraceView.of(self.store.get_run(run_id, **p.ns))

    # ------------------------------------------------------------------ tokens

    def list_tokens(self, p: Principal, *, limit: int = 50, offset: int = 0) -> Page[TokenView]:
        p.require("admin", "list the namespace's tokens")
        tokens = self.store.list_api_tokens(**p.ns)
        page, next_offset = _page(tokens[offset : offset + limit + 1], limit, offset)
        return Page[TokenView](
            items=[TokenView.of(t) for t in page],
            limit=limit,
            offset=offset,
            next_offset=next_offset,
        )

    def create_token(self, p: Principal, *, scope: str, label: str | None) -> TokenView:
        p.require("admin", "create tokens")
        issued = self.store.create_api_token(scope=scope, label=label, **p.ns)
        return TokenView.of(issued.record, issued.token)

    def revoke_token(self, p: Principal, token_id: str) -> TokenView:
        p.require("admin", "revoke tokens")
        return TokenView.of(self.store.revoke_api_token(token_id, **p.ns))

    def namespace_exists(self, p: Principal) -> bool:
        """Whether anything of the namespace is stored (for ``soloflow mcp`` to warn on a typo)."""
        try:
            return (
                bool(self.store.list_flow_meta(limit=1, **p.ns))
                or self.store.count_runs(**p.ns) > 0
            )
        except NotFoundError:
            return False
