"""Which flow, if any, runs for a request with no model call — and why not the others.

:func:`decide_route` takes the flows that procedural memory found for a request (its hint
candidates) and keeps the one that may run unasked. A flow may run only when all hold:

1. it is ``active`` and its record allows it (:func:`~soloflow_core.learning.may_auto_execute`:
   ``auto_execute`` on, confidence ≥ ``confidence_threshold``);
2. the request is its job (:func:`~soloflow_core.memory.intent.judge_intent` against the
   flow's evidence: the task texts of its runs; a user-submitted flow's own name,
   description and trigger keywords);
3. every required input is bound from the request itself, its shape and type checked, and
   no value of the request is left unused (:func:`~soloflow_core.memory.intent.bind_inputs`).

When several flows pass, the same job (the same tools) keeps the user-submitted flow, then
the best-scored; different jobs are ambiguous and none runs. Every flow's verdict and
reasons are kept (:class:`RouteDecision`), for logs and ``soloflow flows route``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soloflow_core.learning.outcomes import FlowStats, may_auto_execute
from soloflow_core.memory.intent import (
    JobEvidence,
    RequestText,
    Verdict,
    bind_inputs,
    judge_intent,
    read_request,
)
from soloflow_core.memory.procedural import same_job
from soloflow_core.models import SOURCE_USER

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.memory.procedural import WorkflowMatch
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store import Store

__all__ = ["FlowCheck", "RouteDecision", "decide_route"]


@dataclass(frozen=True, slots=True)
class FlowCheck:
    """One flow's verdict for a request."""

    name: str
    verdict: Verdict
    """``run`` (may run unasked), ``hint`` (offer it to the model) or ``none``."""
    score: float
    inputs: dict[str, Any] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()
    """Why it may not run (empty when it may)."""


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """What :func:`decide_route` decided."""

    run: str | None
    """The flow to run with no model call, or None."""
    inputs: dict[str, Any]
    """Its inputs, bound from the request."""
    checks: tuple[FlowCheck, ...]
    """Every candidate's verdict, in the order given."""
    reason: str
    """One line: why this flow, or why none."""


def _declared(flow: FlowDefinition, keywords: Sequence[str]) -> list[str]:
    return [flow.name, flow.description, *keywords, *flow.tags]


def decide_route(
    store: Store,
    request: str | RequestText,
    matches: Sequence[WorkflowMatch],
    *,
    user_id: str,
    agent_id: str,
    config: LearningConfig,
    definition: Callable[[str], FlowDefinition],
    stats: Callable[[str], FlowStats],
) -> RouteDecision:
    """The flow among ``matches`` that may run for ``request`` with no model call (see the
    module docstring), with every candidate's verdict.

    Args:
        matches: procedural memory's matches for the request (best first).
        definition: a flow's definition by name.
        stats: a flow's outcome record by name.
    """
    read = request if isinstance(request, RequestText) else read_request(request)
    if not matches:
        return RouteDecision(None, {}, (), "no flow matches the request")
    names = [m.name for m in matches]
    texts = store.flow_evidence(names, user_id=user_id, agent_id=agent_id)
    evidence: dict[str, JobEvidence] = {}
    for m in matches:
        user = m.source == SOURCE_USER
        declared: list[str] = []
        if user:  # a person's own words for the job
            keywords = store.get_flow_meta(m.name, user_id=user_id, agent_id=agent_id).trigger_keywords
            declared = _declared(definition(m.name), keywords)
        evidence[m.name] = JobEvidence.of(texts.get(m.name, []), declared, user_submitted=user)
    checks: list[FlowCheck] = []
    runnable: list[tuple[WorkflowMatch, FlowCheck]] = []
    for m in matches:
        others: set[str] = set()
        for o in matches:
            if o.name != m.name and not same_job(o.skill_keys, m.skill_keys):
                others |= evidence[o.name].common()
        verdict = judge_intent(evidence[m.name], read, other_jobs=others)
        reasons = list(verdict.reasons)
        inputs: dict[str, Any] = {}
        if m.status != "active":
            reasons.append(f"the flow is {m.status}")
        elif not may_auto_execute(stats(m.name), config):
            reasons.append("its record does not allow running unasked (auto_execute off, or "
                           f"confidence below {config.confidence_threshold})")  # fmt: skip
        if verdict.verdict == "run":
            flow = definition(m.name)
            binding = bind_inputs(flow.input_schema, flow.extraction, read)
            reasons += binding.problems
            inputs = binding.inputs
        kind: Verdict = "run" if not reasons else ("none" if verdict.verdict == "none" else "hint")
        check = FlowCheck(m.name, kind, verdict.score, inputs if kind == "run" else {}, tuple(reasons))
        checks.append(check)
        if kind == "run":
            runnable.append((m, check))
    if not runnable:
        best = checks[0]
        return RouteDecision(None, {}, tuple(checks),
                             f"no flow may run unasked; {best.name!r}: {'; '.join(best.reasons)}")
    chosen = _choose(runnable)
    if chosen is None:
        listed = ", ".join(repr(c.name) for _, c in runnable)
        return RouteDecision(None, {}, tuple(checks),
                             f"the request fits several jobs ({listed}): the model decides")
    m, check = chosen
    return RouteDecision(m.name, check.inputs, tuple(checks), f"the request is {m.name!r}'s job")


def _choose(runnable: list[tuple[WorkflowMatch, FlowCheck]]) -> tuple[WorkflowMatch, FlowCheck] | None:
    """One flow when the runnable ones do one job: user-submitted first, then the best score;
    None when they do different jobs."""
    first = runnable[0][0]
    if any(not same_job(m.skill_keys, first.skill_keys) for m, _ in runnable[1:]):
        return None
    return min(runnable, key=lambda mc: (mc[0].source != SOURCE_USER, -mc[1].score, mc[0].name))
