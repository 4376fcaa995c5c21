"""The savings ledger: what a flow's runs saved against the agent runs it replaced, measured.

For each registered flow:

- **the agent side**: the runs its candidate was learned from (``FlowCandidate.run_ids``),
  as captured: model calls, tokens (the models' ``usage_metadata``), cost (``TaskRun.cost``
  when known) and wall time (``ended_at − started_at``), averaged per run;
- **the flow side**: the flow's own runs in the store (``sf_flow_runs``): wall time per run;
  a flow makes no model call, so its model calls, tokens and model cost are 0;
- **measured savings**: (agent mean − flow mean) per execution, and that times the flow's
  completed runs (the occurrences it replaced);
- next to them, **the design document's estimate** the detector made before the flow
  existed (``estimated_token_savings``, ``tokens_saved_per_occurrence``).

The agent's whole run is measured: for a candidate found inside longer runs
(``match_type="subsequence"``) the agent side includes the work around the pattern.
Framework-free; ``soloflow flows stats`` and the demo print it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError

if TYPE_CHECKING:
    from soloflow_core.models import FlowCandidate, TaskRun
    from soloflow_core.store import Store
    from soloflow_core.store.procedural import FlowMeta

__all__ = ["FlowSavings", "SideMeasure", "measure_agent_runs", "measure_flow_savings"]

MAX_MEASURED_RUNS = 500
"""Agent runs (and flow runs) read per flow; the means are over these."""


@dataclass(frozen=True, slots=True)
class SideMeasure:
    """Per-run means of one side (agent or flow); None where nothing was measured."""

    runs: int
    """How many runs the means are over."""
    model_calls: float | None = None
    tokens: float | None = None
    cost: float | None = None
    """Only over runs whose cost is known."""
    latency_ms: float | None = None


@dataclass(frozen=True, slots=True)
class FlowSavings:
    """One flow's record and its savings, measured and estimated."""

    flow: str
    version: int
    source: str
    status: str
    confidence: float
    success_count: int
    total_executions: int
    candidate_id: str | None
    agent: SideMeasure
    """Per agent run the flow's candidate came from."""
    flow_runs: SideMeasure
    """Per run of the flow."""
    completed_runs: int
    """Flow runs that completed: the agent occurrences they replaced."""
    saved_per_run: SideMeasure
    """Agent mean − flow mean (``runs`` = completed flow runs)."""
    saved_total: SideMeasure
    """``saved_per_run`` × ``completed_runs``."""
    estimated_token_savings: float | None
    """The detector's estimate over the candidate's occurrences (the design document's)."""
    estimated_tokens_per_occurrence: float | None
    savings_method: str | None
    """How the detector estimated (``measured: ...`` or ``design-doc: ...``)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ms(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    if (start.tzinfo is None) != (end.tzinfo is None):  # one side naive (SQLite): compare as UTC
        start, end = start.replace(tzinfo=None), end.replace(tzinfo=None)
    return max(0.0, (end - start).total_seconds() * 1000)


def measure_agent_runs(runs: Sequence[TaskRun]) -> SideMeasure:
    """Per-run means over captured agent runs."""
    tokens = [
        float(r.tokens if r.tokens is not None else sum(m.total_tokens for m in r.model_calls))
        for r in runs
    ]
    latencies = [ms for r in runs if (ms := _ms(r.started_at, r.ended_at)) is not None]
    return SideMeasure(
        runs=len(runs),
        model_calls=_mean([float(len(r.model_calls)) for r in runs]),
        tokens=_mean(tokens),
        cost=_mean([r.cost for r in runs if r.cost is not None]),
        latency_ms=_mean(latencies),
    )


def _flow_side(rows: Sequence[dict[str, Any]]) -> tuple[SideMeasure, int]:
    ended = [r for r in rows if r.get("ended_at") is not None]
    latencies = [
        ms for r in ended if (ms := _ms(r.get("started_at"), r.get("ended_at"))) is not None
    ]
    completed = sum(1 for r in rows if r.get("status") == "completed")
    if not ended:
        return SideMeasure(runs=0), completed
    return SideMeasure(
        runs=len(ended), model_calls=0.0, tokens=0.0, cost=0.0, latency_ms=_mean(latencies)
    ), completed


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _times(a: float | None, k: int) -> float | None:
    return None if a is None else a * k


def measure_flow_savings(
    store: Store, meta: FlowMeta, *, user_id: str, agent_id: str
) -> FlowSavings:
    """The savings record of one flow (``meta``: from ``Store.get_flow_meta``)."""
    cand: FlowCandidate | None = None
    if meta.candidate_id is not None:
        try:
            cand = store.get_candidate(meta.candidate_id, user_id=user_id, agent_id=agent_id)
        except NotFoundError:
            cand = None
    runs: list[TaskRun] = []
    if cand is not None and cand.run_ids:
        runs = store.load_runs(cand.run_ids[:MAX_MEASURED_RUNS], user_id=user_id, agent_id=agent_id)
    agent = measure_agent_runs(runs)
    rows = store.list_flow_runs(
        user_id=user_id, agent_id=agent_id, flow_name=meta.name, limit=MAX_MEASURED_RUNS
    )
    flow, completed = _flow_side(rows)
    per_run = SideMeasure(
        runs=completed,
        model_calls=_minus(agent.model_calls, flow.model_calls),
        tokens=_minus(agent.tokens, flow.tokens),
        cost=_minus(agent.cost, flow.cost),
        latency_ms=_minus(agent.latency_ms, flow.latency_ms),
    )
    total = SideMeasure(
        runs=completed,
        model_calls=_times(per_run.model_calls, completed),
        tokens=_times(per_run.tokens, completed),
        cost=_times(per_run.cost, completed),
        latency_ms=_times(per_run.latency_ms, completed),
    )
    return FlowSavings(
        flow=meta.name,
        version=meta.version,
        source=meta.source,
        status=meta.status,
        confidence=meta.confidence,
        success_count=meta.success_count,
        total_executions=meta.total_executions,
        candidate_id=meta.candidate_id,
        agent=agent,
        flow_runs=flow,
        completed_runs=completed,
        saved_per_run=per_run,
        saved_total=total,
        estimated_token_savings=None if cand is None else cand.estimated_token_savings,
        estimated_tokens_per_occurrence=None if cand is None else cand.tokens_saved_per_occurrence,
        savings_method=None if cand is None else cand.savings_method,
    )
