"""Flow records in the store: what every execution, and every agent run of a flow's job, teaches.

- :func:`flow_stats` — a registered flow's :class:`~soloflow_core.learning.outcomes.FlowStats`,
  rebuilt from its row (counts, status) and its ``learning`` state (prior, streaks, agent
  runs seen).
- :func:`record_flow_outcome` — one execution: the flow runtime calls it for every run of a
  registered flow that ends, whichever way it was started (the middleware, a flow tool,
  :class:`FlowRuntime`, ``soloflow flows run``). A run refused before any step (its inputs
  failed the flow's input check) is not an execution.
- :func:`record_agent_run` — a captured agent run: each registered flow whose sequence the
  agent did itself, successfully, gains the run's task as evidence of its job
  (:mod:`soloflow_core.store.evidence`) and a success in its confidence
  (:func:`~soloflow_core.learning.outcomes.record_agent_run`).
"""

from __future__ import annotations

import logging
import threading
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

__all__ = [
    "LEDGER_LOOKBACK",
    "flow_stats",
    "flows_done_by",
    "record_agent_run",
    "record_flow_outcome",
    "seed_evidence",
]

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
"""One read-modify-write of a flow's record at a time in this process."""


def flow_stats(store: Store, name: str, *, user_id: str, agent_id: str) -> FlowStats:
    """The latest version's outcome record, rebuilt from the store.

    A flow with no learning state yet starts from :func:`initial_stats`: a person's prior
    for a user-submitted flow, the candidate's replay fidelity for a learned one.

    Raises:
        NotFoundError: no such flow in the namespace.
    """
    meta = store.get_flow_meta(name, user_id=user_id, agent_id=agent_id)
    state = store.get_flow_learning(name, user_id=user_id, agent_id=agent_id)
    if state is None:
        state = _initial_state(store, meta.source, meta.candidate_id, user_id, agent_id)
    return FlowStats.model_validate({
        **state, "success_count": meta.success_count, "total_executions": meta.total_executions,
        "status": meta.status, "last_executed_at": meta.last_used,
    })  # fmt: skip


def _initial_state(
    store: Store, source: str, candidate_id: str | None, user_id: str, agent_id: str
) -> dict[str, Any]:
    if source == SOURCE_USER:
        return initial_stats(user_submitted=True).learning_state()
    fidelity = None
    if candidate_id is not None:
        try:
            fidelity = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id).fidelity
        except NotFoundError:
            fidelity = None
    return initial_stats(fidelity=fidelity).learning_state()


def _write(store: Store, name: str, user_id: str, agent_id: str, stats: FlowStats) -> None:
    store.update_flow_meta(
        name, user_id=user_id, agent_id=agent_id, confidence=stats.confidence,
        status=stats.status, learning=stats.learning_state(),
    )  # fmt: skip


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
    with _LOCK:
        before = flow_stats(store, name, user_id=user_id, agent_id=agent_id)
        after = outcomes.record_outcome(before, success, config, at=at)
        store.record_flow_execution(name, user_id=user_id, agent_id=agent_id, success=success, at=at)
        _write(store, name, user_id, agent_id, after)
    if after.status != before.status:
        log.warning(
            "SoloFlow: flow %r is now %s (%d of %d executions succeeded)",
            name, after.status, after.success_count, after.total_executions,
        )  # fmt: skip
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


def _does(calls: Sequence[str], flow: FlowDefinition) -> bool:
    """Whether ``calls`` (tool names, in order) hold the flow's steps contiguously; a map step
    (``map_over``) may be called any number of times in a row."""
    want: list[tuple[str, int, bool]] = []  # (tool, how many steps, a map step among them)
    for step in flow.steps:
        if want and want[-1][0] == step.skill_key:
            tool, count, mapped = want[-1]
            want[-1] = (tool, count + 1, mapped or step.map_over is not None)
        else:
            want.append((step.skill_key, 1, step.map_over is not None))
    units = _units(calls)
    for start in range(len(units) - len(want) + 1):
        window = units[start : start + len(want)]
        if all(u[0] == tool and (u[1] == count or (mapped and u[1] >= 1))
               for u, (tool, count, mapped) in zip(window, want, strict=True)):  # fmt: skip
            return True
    return False


def flows_done_by(run: TaskRun, flows: Iterable[FlowDefinition]) -> list[str]:
    """The names of ``flows`` whose whole sequence ``run`` did itself, successfully: the run
    succeeded (or ended with success unknown) and the calls of the sequence raised nothing
    (a failed attempt retried at once by the same tool counts as that retry)."""
    if run.success is False or (run.success is None and run.ended_at is None):
        return []
    calls = _successful([c.name for c in run.tool_calls], [c.error is True for c in run.tool_calls])
    return [f.name for f in flows if len(f.steps) >= 2 and _does(calls, f)]


def _successful(names: Sequence[str], errors: Sequence[bool]) -> list[str]:
    """The calls that succeeded, a failure that is not retried at once by the same tool
    standing as a break no sequence goes through."""
    calls: list[str] = []
    for i, (name, error) in enumerate(zip(names, errors, strict=True)):
        if error:
            if not (i + 1 < len(names) and names[i + 1] == name):
                calls.append("\x00")
            continue
        calls.append(name)
    return calls


LEDGER_LOOKBACK = 2000
"""Runs of the namespace read, newest first, for the evidence of a newly registered flow."""


def seed_evidence(store: Store, flow: FlowDefinition, *, user_id: str, agent_id: str) -> int:
    """Give a newly registered flow, as evidence of its job, the tasks of every run among the
    namespace's newest :data:`LEDGER_LOOKBACK` that did its whole sequence successfully (the
    agent's runs before the flow existed). Returns how many texts were added."""
    if len(flow.steps) < 2:
        return 0
    done = [
        seq.run_id
        for seq in store.iter_sequences(user_id=user_id, agent_id=agent_id, lookback=LEDGER_LOOKBACK)
        if seq.success is not False and _does(_successful(seq.names, seq.errors), flow)
    ]
    tasks = store.task_texts(done, user_id=user_id, agent_id=agent_id)
    return store.add_flow_evidence(flow.name, [(rid, tasks[rid]) for rid in done if rid in tasks],
                                   source="agent_run", user_id=user_id, agent_id=agent_id)


def record_agent_run(store: Store, run: TaskRun) -> list[str]:
    """Credit every registered, non-retired flow of the run's namespace whose sequence the
    agent did itself: its task joins the flow's evidence, and its confidence counts one more
    success. Returns the flows credited (by name).

    Runs without a task, and runs a flow answered (no tool call of their own), credit none.
    """
    if not run.tool_calls:
        return []
    user_id, agent_id = run.user_id, run.agent_id
    tools = {c.name for c in run.tool_calls}
    metas = [m for m in store.list_flow_meta(user_id=user_id, agent_id=agent_id, include_retired=False)
             if set(m.skill_keys) <= tools]  # fmt: skip
    if not metas:
        return []
    defs = [store.get_flow(m.name, user_id=user_id, agent_id=agent_id).flow for m in metas]
    done = flows_done_by(run, defs)
    for name in done:
        if run.task and run.task.strip():
            store.add_flow_evidence(name, [(run.run_id, run.task)], source="agent_run",
                                    user_id=user_id, agent_id=agent_id)  # fmt: skip
        with _LOCK:
            stats = outcomes.record_agent_run(flow_stats(store, name, user_id=user_id, agent_id=agent_id))
            _write(store, name, user_id, agent_id, stats)
    return done
