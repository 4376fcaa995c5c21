"""Flow records in the store: what every execution, and every agent run of a flow's job, teaches.

- :func:`flow_stats` — a registered flow's :class:`~soloflow_core.learning.outcomes.FlowStats`,
  rebuilt from its row (counts, status) and its ``learning`` state (prior, streaks, agent
  runs seen).
- :func:`record_flow_outcome` — one execution: the flow runtime calls it for every run of a
  registered flow that ends, whichever way it was started (the middleware, a flow tool,
  :class:`FlowRuntime`, ``soloflow flows run``). A run refused before any step (its inputs
  failed the flow's input check) is not an execution.
- :func:`record_agent_run` — a captured agent run. A flow whose whole sequence the agent did
  itself, successfully, gains a success in its confidence
  (:func:`~soloflow_core.learning.outcomes.record_agent_run`; one stray call between two
  steps is tolerated, as verification tolerates it). The run's task becomes
  evidence of the flow's job only when the run was that job and nothing else: its calls were
  exactly the flow's sequence (source ``agent_run``), or one successful call of the flow's
  own tool (``flow_tool``: the model chose the flow it was offered, and a word only such
  texts hold is known once :data:`~soloflow_core.memory.intent.CONFIRMATIONS` hold it).

Each record is changed in one transaction with its row locked
(:meth:`~soloflow_core.store.flows.FlowRepository.change_flow_record`): outcomes from
several processes are never lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError
from soloflow_core.learning import outcomes
from soloflow_core.learning.outcomes import FlowStats, initial_stats
from soloflow_core.models import SOURCE_USER

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.models import FlowDefinition, TaskRun
    from soloflow_core.store import Store
    from soloflow_core.store.evidence import EvidenceSource
    from soloflow_core.store.procedural import FlowMeta

__all__ = [
    "FLOW_RUN_TOOL",
    "LEDGER_LOOKBACK",
    "flow_stats",
    "flows_done_by",
    "record_agent_run",
    "record_flow_outcome",
    "seed_evidence",
]

log = logging.getLogger(__name__)

FLOW_RUN_TOOL = "flow_run"
"""The tool that runs any flow of a namespace by name (its ``name`` argument)."""
LEDGER_LOOKBACK = 2000
"""Runs of the namespace read, newest first, for the evidence of a newly registered flow."""


def _stats_of(
    store: Store, meta: FlowMeta, learning: dict[str, Any] | None, user_id: str, agent_id: str
) -> FlowStats:
    state = (
        learning
        if learning is not None
        else _initial_state(
            store, meta.source, candidate_id=meta.candidate_id, user_id=user_id, agent_id=agent_id
        )
    )
    return FlowStats.model_validate(
        {
            **state,
            "success_count": meta.success_count,
            "total_executions": meta.total_executions,
            "status": meta.status,
            "last_executed_at": meta.last_used,
        }
    )


def flow_stats(store: Store, name: str, *, user_id: str, agent_id: str) -> FlowStats:
    """The latest version's outcome record, rebuilt from the store.

    A flow with no learning state yet starts from :func:`initial_stats`: a person's prior
    for a user-submitted flow, the candidate's replay fidelity for a learned one.

    Raises:
        NotFoundError: no such flow in the namespace.
    """
    meta = store.get_flow_meta(name, user_id=user_id, agent_id=agent_id)
    learning = store.get_flow_learning(name, user_id=user_id, agent_id=agent_id)
    return _stats_of(store, meta, learning=learning, user_id=user_id, agent_id=agent_id)


def _initial_state(
    store: Store, source: str, candidate_id: str | None, user_id: str, agent_id: str
) -> dict[str, Any]:
    if source == SOURCE_USER:
        return initial_stats(user_submitted=True).learning_state()
    fidelity = None
    if candidate_id is not None:
        try:
            fidelity = store.get_candidate(
                candidate_id, user_id=user_id, agent_id=agent_id
            ).fidelity
        except NotFoundError:
            fidelity = None
    return initial_stats(fidelity=fidelity).learning_state()


def _columns(stats: FlowStats) -> dict[str, Any]:
    return {
        "success_count": stats.success_count,
        "total_executions": stats.total_executions,
        "confidence": stats.confidence,
        "status": stats.status,
        "learning": stats.learning_state(),
        "last_used": stats.last_executed_at,
    }


def record_flow_outcome(
    store: Store,
    name: str,
    *,
    success: bool,
    user_id: str,
    agent_id: str,
    config: LearningConfig,
    at: datetime | None = None,
) -> FlowStats:
    """Count one execution of the flow ``name`` and store its new confidence and status.

    Raises:
        NotFoundError: no such flow in the namespace.
    """
    seen: dict[str, FlowStats] = {}

    def change(meta: FlowMeta, learning: dict[str, Any] | None) -> dict[str, Any]:
        before = _stats_of(store, meta, learning=learning, user_id=user_id, agent_id=agent_id)
        after = outcomes.record_outcome(before, success, config, at=at)
        seen.update(before=before, after=after)
        return _columns(after)

    store.change_flow_record(name, user_id=user_id, agent_id=agent_id, change=change)
    before, after = seen["before"], seen["after"]
    if after.status != before.status:
        log.warning(
            "SoloFlow: flow %r is now %s (%d of %d executions succeeded)",
            name,
            after.status,
            after.success_count,
            after.total_executions,
        )
    return after


def _units(names: Sequence[str]) -> list[tuple[str, int]]:
    """``names`` with runs of the same name collapsed: (name, how many)."""
    out: list[tuple[str, int]] = []
    for n in names:
        if out and out[-1][0] == n:
            out[-1] = (n, out[-1][1] + 1)
        else:
            out.append((n, 1))
    return out


def _want(flow: FlowDefinition) -> list[tuple[str, int, bool]]:
    """The flow's steps as units: (tool, how many steps, a map step among them)."""
    want: list[tuple[str, int, bool]] = []
    for step in flow.steps:
        if want and want[-1][0] == step.skill_key:
            tool, count, mapped = want[-1]
            want[-1] = (tool, count + 1, mapped or step.map_over is not None)
        else:
            want.append((step.skill_key, 1, step.map_over is not None))
    return want


def _fits(window: Sequence[tuple[str, int]], want: Sequence[tuple[str, int, bool]]) -> bool:
    return all(
        u[0] == tool and (u[1] == count or (mapped and u[1] >= 1))
        for u, (tool, count, mapped) in zip(window, want, strict=True)
    )


def _does(calls: Sequence[str], flow: FlowDefinition, *, whole: bool = False) -> bool:
    """Whether ``calls`` (tool names, in order) hold the flow's steps — with ``whole``,
    are exactly them; otherwise one stray call between two steps is tolerated, as
    verification tolerates it (:data:`~soloflow_core.generalize.align.TOLERATED_GAP`). A map
    step may be called any number of times in a row."""
    want = _want(flow)
    units = _units(calls)
    if whole:
        return len(units) == len(want) and _fits(units, want)
    return any(_fits_from(units, want, start) for start in range(len(units)))


def _fits_from(
    units: Sequence[tuple[str, int]], want: Sequence[tuple[str, int, bool]], at: int
) -> bool:
    """Whether ``want`` is held from unit ``at`` on, each next step right after the last or
    one stray unit later (a break, ``\x00``, is never a stray)."""
    pos = at
    for k, (tool, count, mapped) in enumerate(want):
        reach = [pos] if k == 0 else [pos, pos + 1]
        hit = next(
            (
                j
                for j in reach
                if j < len(units)
                and _fits([units[j]], [(tool, count, mapped)])
                and (j == pos or units[pos][0] != "\x00")
            ),
            None,
        )
        if hit is None:
            return False
        pos = hit + 1
    return True


def _successful(names: Sequence[str], errors: Sequence[bool]) -> list[str]:
    """The calls that succeeded; a failure that is not retried at once by the same tool stands
    as a break no sequence goes through."""
    calls: list[str] = []
    for i, (name, error) in enumerate(zip(names, errors, strict=True)):
        if error:
            if not (i + 1 < len(names) and names[i + 1] == name):
                calls.append("\x00")
            continue
        calls.append(name)
    return calls


def _ended_well(run: TaskRun) -> bool:
    return run.success is True or (run.success is None and run.ended_at is not None)


def flows_done_by(run: TaskRun, flows: Iterable[FlowDefinition]) -> list[str]:
    """The names of ``flows`` whose whole sequence ``run`` did itself, successfully: the run
    succeeded (or ended with success unknown) and the calls of the sequence raised nothing
    (a failed attempt retried at once by the same tool counts as that retry); one stray call
    between two steps is tolerated, as in verification."""
    if not _ended_well(run):
        return []
    calls = _successful([c.name for c in run.tool_calls], [c.error is True for c in run.tool_calls])
    return [f.name for f in flows if len(f.steps) >= 2 and _does(calls, f)]


def _only_the_job(run: TaskRun, flow: FlowDefinition) -> EvidenceSource | None:
    """How the run was the flow's job and nothing else, if it was: ``agent_run`` when its
    calls are exactly the flow's sequence (retries aside), ``flow_tool`` when it is one
    successful call of the flow's own tool (the model chose the offered flow); None."""
    calls = run.tool_calls
    if len(calls) == 1 and calls[0].error is not True:
        call = calls[0]
        if call.meta.get("soloflow_flow") == flow.name:
            return "flow_tool"
        if call.name == FLOW_RUN_TOOL and call.args.get("name") == flow.name:
            return "flow_tool"
    names = _successful([c.name for c in calls], [c.error is True for c in calls])
    return "agent_run" if "\x00" not in names and _does(names, flow, whole=True) else None


def record_agent_run(store: Store, run: TaskRun) -> list[str]:
    """Credit the registered, non-retired flows of the run's namespace with a captured agent
    run (see the module docstring). Returns the flows whose evidence or confidence changed.

    A run that failed, or ended without telling, credits none; so does a run a flow
    answered (no tool call of its own).
    """
    if not run.tool_calls or not _ended_well(run):
        return []
    user_id, agent_id = run.user_id, run.agent_id
    tools = {c.name for c in run.tool_calls}
    metas = store.list_flow_meta(user_id=user_id, agent_id=agent_id, include_retired=False)
    metas = [
        m
        for m in metas
        if set(m.skill_keys) <= tools
        or FLOW_RUN_TOOL in tools
        or any(c.meta.get("soloflow_flow") == m.name for c in run.tool_calls)
    ]
    credited: list[str] = []
    for meta in metas:
        flow = store.get_flow(meta.name, user_id=user_id, agent_id=agent_id).flow
        did = len(flow.steps) >= 2 and flow.name in flows_done_by(run, [flow])
        task = run.task or ""
        source = _only_the_job(run, flow) if task.strip() else None
        if source is not None:
            store.add_flow_evidence(
                flow.name,
                [(run.run_id, task)],
                source=source,
                user_id=user_id,
                agent_id=agent_id,
            )
            credited.append(flow.name)
        if did:  # the steps work: a success in the confidence, not an execution

            def change(m: FlowMeta, learning: dict[str, Any] | None) -> dict[str, Any]:
                stats = _stats_of(store, m, learning=learning, user_id=user_id, agent_id=agent_id)
                return _columns(outcomes.record_agent_run(stats))

            store.change_flow_record(flow.name, user_id=user_id, agent_id=agent_id, change=change)
            if flow.name not in credited:
                credited.append(flow.name)
    return credited


def seed_evidence(store: Store, flow: FlowDefinition, *, user_id: str, agent_id: str) -> int:
    """Give a newly registered flow, as evidence of its job, the tasks of every run among the
    namespace's newest :data:`LEDGER_LOOKBACK` whose calls were exactly its sequence and which
    succeeded (the agent's runs of the job before the flow existed). Returns how many texts
    were added."""
    if len(flow.steps) < 2:
        return 0
    done = []
    for seq in store.iter_sequences(user_id=user_id, agent_id=agent_id, lookback=LEDGER_LOOKBACK):
        if seq.success is False:
            continue
        calls = _successful(seq.names, seq.errors)
        if "\x00" not in calls and _does(calls, flow, whole=True):
            done.append(seq.run_id)
    tasks = store.task_texts(done, user_id=user_id, agent_id=agent_id)
    return store.add_flow_evidence(
        flow.name,
        [(rid, tasks[rid]) for rid in done if rid in tasks],
        source="agent_run",
        user_id=user_id,
        agent_id=agent_id,
    )
