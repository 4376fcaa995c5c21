"""A flow's quality score: four dimensions, each in [0, 1], from what the store measured.

- **reliability** = the flow's confidence: the mean of the Beta posterior of its success
  probability, ``(α + successes) / (α + β + executions)``, as the outcome rules keep it
  (:mod:`soloflow_core.learning.outcomes`);
- **efficiency** = the mean, over the measures the savings ledger has for the flow (model
  calls, tokens, latency — measured as :mod:`soloflow_core.learning.savings` measures them:
  the agent runs its candidate was learned from against the flow's own ended runs), of the
  share of the agent's per-run cost one run of the flow saves,
  ``clamp((agent − flow) / agent, 0, 1)``; 0 when nothing was measured (a user-submitted
  flow has no agent runs; a flow never run has no flow side);
- **maturity** = ``(s(uses, 10) + s(age in days, 30) + s(verified occurrences, 5)) / 3``
  with ``s(x, h) = x / (x + h)`` (½ at ``x = h``): executions of this version, days since it
  was registered, and occurrences it was verified on (a learned flow's candidate
  occurrences times its replay fidelity; an imported flow's fixtures, each replayed at
  import);
- **reusability** = ``(s(distinct tasks, 5) + s(distinct inputs, 10)) / 2``: the distinct task
  texts of the runs it was learned from (or of its fixtures), and the distinct input objects
  its own runs of this version were given (among the flow's newest 500 runs);
- **overall** = the mean of the four.

Framework-free: ``flows list/show``, the REST API and the MCP server show it, and
:func:`order_ties_by_quality` orders suggestions whose text scores tie.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from soloflow_core.errors import NotFoundError
from soloflow_core.learning.savings import MAX_MEASURED_RUNS, SideMeasure, measure_agent_runs

if TYPE_CHECKING:
    from soloflow_core.models import FlowCandidate
    from soloflow_core.store import Store
    from soloflow_core.store.procedural import FlowMeta
    from soloflow_core.store.usage import FlowRunSample

__all__ = [
    "AgentSide",
    "HALF_AGE_DAYS",
    "HALF_DISTINCT_INPUTS",
    "HALF_DISTINCT_TASKS",
    "HALF_USES",
    "HALF_VERIFIED",
    "QualityEvidence",
    "QualityScore",
    "agent_side",
    "flow_quality",
    "flow_side",
    "flows_quality",
    "order_ties_by_quality",
    "quality_score",
    "saturate",
    "saved_fractions",
]

HALF_USES = 10
"""Executions at which the uses term of maturity is ½."""
HALF_AGE_DAYS = 30.0
"""Days at which the age term of maturity is ½."""
HALF_VERIFIED = 5
"""Verified occurrences at which that term of maturity is ½."""
HALF_DISTINCT_TASKS = 5
"""Distinct tasks at which that term of reusability is ½."""
HALF_DISTINCT_INPUTS = 10
"""Distinct input objects at which that term of reusability is ½."""
_MEASURES = ("model_calls", "tokens", "latency_ms")


def saturate(x: float, half: float) -> float:
    """``x / (x + half)``: 0 at 0, ½ at ``half``, towards 1 beyond (0 for ``x ≤ 0``)."""
    return 0.0 if x <= 0 else x / (x + half)


@dataclass(frozen=True, slots=True)
class QualityEvidence:
    """What a score was computed from."""

    confidence: float
    uses: int
    age_days: float
    verified_occurrences: int
    distinct_tasks: int
    distinct_inputs: int
    saved: dict[str, float] = field(default_factory=dict)
    """Per measure (``model_calls``, ``tokens``, ``latency_ms``): the share of the agent's
    per-run cost a flow run saved; only the measures the savings ledger has."""


@dataclass(frozen=True, slots=True)
class QualityScore:
    """A flow version's quality in four dimensions, each in [0, 1]; see the module's formulas."""

    reliability: float
    efficiency: float
    maturity: float
    reusability: float
    overall: float
    evidence: QualityEvidence

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def quality_score(evidence: QualityEvidence) -> QualityScore:
    """The four dimensions and their mean, from ``evidence`` (pure)."""
    reliability = _clamp(evidence.confidence)
    efficiency = sum(evidence.saved.values()) / len(evidence.saved) if evidence.saved else 0.0
    maturity = (
        saturate(evidence.uses, HALF_USES)
        + saturate(evidence.age_days, HALF_AGE_DAYS)
        + saturate(evidence.verified_occurrences, HALF_VERIFIED)
    ) / 3
    reusability = (
        saturate(evidence.distinct_tasks, HALF_DISTINCT_TASKS)
        + saturate(evidence.distinct_inputs, HALF_DISTINCT_INPUTS)
    ) / 2
    r, e, m, u = (round(_clamp(x), 4) for x in (reliability, efficiency, maturity, reusability))
    return QualityScore(
        reliability=r,
        efficiency=e,
        maturity=m,
        reusability=u,
        overall=round((r + e + m + u) / 4, 4),
        evidence=evidence,
    )


def saved_fractions(agent: SideMeasure, flow: SideMeasure) -> dict[str, float]:
    """Per measure both sides have (the agent's positive): the share of the agent's per-run
    cost one flow run saves, ``clamp((agent − flow) / agent, 0, 1)``."""
    out: dict[str, float] = {}
    for name in _MEASURES:
        a, f = getattr(agent, name), getattr(flow, name)
        if a is None or f is None or a <= 0 or math.isnan(a - f):
            continue
        out[name] = round(_clamp((a - f) / a), 4)
    return out


def _ms(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    if (start.tzinfo is None) != (end.tzinfo is None):
        start, end = start.replace(tzinfo=None), end.replace(tzinfo=None)
    return max(0.0, (end - start).total_seconds() * 1000)


def flow_side(runs: Sequence[FlowRunSample]) -> SideMeasure:
    """The flow's side of the savings ledger (``flows stats``): per ended run, its wall time;
    a flow makes no model call, so 0 model calls, tokens and model cost."""
    latencies = [ms for r in runs if (ms := _ms(r.started_at, r.ended_at)) is not None]
    if not latencies:
        return SideMeasure(runs=0)
    return SideMeasure(
        runs=len(latencies),
        model_calls=0.0,
        tokens=0.0,
        cost=0.0,
        latency_ms=sum(latencies) / len(latencies),
    )


AgentSide = tuple[SideMeasure, int]
"""Per-run means of the agent runs a candidate was learned from, and their distinct tasks."""


def agent_side(store: Store, cand: FlowCandidate) -> AgentSide:
    """The agent runs of ``cand`` (the newest 500), measured as the savings ledger measures them."""
    runs = store.load_runs(
        cand.run_ids[:MAX_MEASURED_RUNS], user_id=cand.user_id, agent_id=cand.agent_id
    )
    return measure_agent_runs(runs), len({r.task for r in runs if r.task})


def _age_days(created: datetime, at: datetime) -> float:
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return max(0.0, (at - created).total_seconds() / 86400)


def flows_quality(
    store: Store,
    metas: Sequence[FlowMeta],
    *,
    user_id: str,
    agent_id: str,
    at: datetime | None = None,
    agent_side_of: Callable[[FlowCandidate], AgentSide] | None = None,
) -> dict[tuple[str, int], QualityScore]:
    """The quality of each flow version of ``metas`` (from ``Store.list_flow_meta`` or
    ``get_flow_meta``) in the namespace, by (name, version), measured now (``at``: default the
    current time). Two statements for the whole list, plus, per learned flow, its candidate and
    its agent runs (``agent_side_of``: default :func:`agent_side`; a server caches it)."""
    at = at or datetime.now(UTC)
    names = [m.name for m in metas]
    samples = store.flow_run_samples(names, user_id=user_id, agent_id=agent_id)
    imports = store.skill_imports_for(names, user_id=user_id, agent_id=agent_id)
    measure = agent_side_of or (lambda cand: agent_side(store, cand))
    out: dict[tuple[str, int], QualityScore] = {}
    for meta in metas:
        runs = samples.get(meta.name, [])
        agent, verified, tasks = SideMeasure(runs=0), 0, 0
        imported = imports.get((meta.name, meta.version))
        if imported is not None:
            verified = len(imported.fixtures)
            tasks = len(
                {f.get("task") for f in imported.fixtures if isinstance(f, dict) and f.get("task")}
            )
        elif meta.candidate_id is not None:
            try:
                cand = store.get_candidate(meta.candidate_id, user_id=user_id, agent_id=agent_id)
            except NotFoundError:
                cand = None
            if cand is not None:
                if cand.fidelity is not None:
                    verified = round(cand.fidelity * cand.occurrence_count)
                agent, tasks = measure(cand)
        inputs = {
            json.dumps(r.inputs, sort_keys=True, default=str)
            for r in runs
            if r.version == meta.version
        }
        evidence = QualityEvidence(
            confidence=meta.confidence,
            uses=meta.total_executions,
            age_days=round(_age_days(meta.created_at, at), 3),
            verified_occurrences=verified,
            distinct_tasks=tasks,
            distinct_inputs=len(inputs),
            saved=saved_fractions(agent, flow_side(runs)),
        )
        out[(meta.name, meta.version)] = quality_score(evidence)
    return out


def flow_quality(
    store: Store, meta: FlowMeta, *, user_id: str, agent_id: str, at: datetime | None = None
) -> QualityScore:
    """The quality of one flow version (see :func:`flows_quality`)."""
    return flows_quality(store, [meta], user_id=user_id, agent_id=agent_id, at=at)[
        (meta.name, meta.version)
    ]


T = TypeVar("T")


def order_ties_by_quality(
    matches: Sequence[T],
    quality_of: Callable[[T], float | None],
    *,
    text_score: Callable[[T], float] = lambda m: float(getattr(m, "text_score")),  # noqa: B009
    keep_above: Callable[[T, T], bool] = lambda a, b: (
        getattr(b, "name", None) in getattr(a, "outranks", ())
    ),
) -> list[T]:
    """``matches`` (best first) with each run of neighbours whose text scores tie reordered
    by overall quality, best first (a missing quality counts as 0; equal qualities keep their
    order). A match stays above one it must stay above (``keep_above``: by default a
    user-submitted flow above the learned flows it outranks), whatever their qualities.

    Example:
        >>> [m.name for m in order_ties_by_quality(matches, lambda m: scores[m.name])]  # doctest: +SKIP
    """
    out: list[T] = []
    i = 0
    while i < len(matches):
        j = i + 1
        while j < len(matches) and text_score(matches[j]) == text_score(matches[i]):
            j += 1
        group = list(matches[i:j])
        if len(group) > 1:
            group = _stable_by_quality(group, quality_of, keep_above)
        out.extend(group)
        i = j
    return out


def _stable_by_quality(
    group: list[T], quality_of: Callable[[T], float | None], keep_above: Callable[[T, T], bool]
) -> list[T]:
    """Insertion by quality that never lifts a match above one that must stay above it."""
    placed: list[T] = []
    for m in group:
        q = quality_of(m) or 0.0
        k = len(placed)
        while k > 0 and (quality_of(placed[k - 1]) or 0.0) < q and not keep_above(placed[k - 1], m):
            k -= 1
        placed.insert(k, m)
    return placed
