"""Detector v1: the design document's flow-sequence detector, over the whole ledger.

Exact sequences and contiguous sub-sequences of length ≥ ``min_sequence_length`` present
in ≥ ``min_occurrences`` distinct runs, closed patterns only, ranked by the design
document's savings formula (average run cost × occurrences × 0.95), with pattern length
and support as tie-breakers. Each candidate's proposed flow has its arguments generalised
from the recorded occurrences (:mod:`soloflow_core.generalize.arguments`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from soloflow_core.generalize.arguments import Occurrence, generalize
from soloflow_core.mining.closed import Pattern, mine_closed_patterns
from soloflow_core.models import (
    DetectorConfig,
    FlowCandidate,
    FlowDefinition,
    FlowStep,
    candidate_id_for,
    dedupe_key_for,
)

if TYPE_CHECKING:
    from soloflow_core.store import RunSequence, Store

SAVINGS_FACTOR = 0.95


def flow_name_for(tool_sequence: Sequence[str]) -> str:
    return "Auto: " + " → ".join(tool_sequence)


def title_case(tool_name: str) -> str:
    return " ".join(w.capitalize() for w in tool_name.replace("-", "_").split("_") if w)


def _avg_cost(pattern: Pattern, runs: Sequence[RunSequence]) -> tuple[float, str]:
    costs = [c for r in pattern.runs if (c := runs[r].cost) is not None]
    if costs:
        return sum(costs) / len(costs), "design-doc: avg_run_cost * occurrences * 0.95 (cost)"
    tokens = [t for r in pattern.runs if (t := runs[r].tokens) is not None]
    if tokens:
        return sum(tokens) / len(tokens), "design-doc: avg_run_tokens * occurrences * 0.95 (no cost recorded)"
    return 0.0, "design-doc formula; no cost or tokens recorded, so 0"


def propose_flow(
    tool_sequence: Sequence[str], occurrences: Sequence[Occurrence], *, observed: int
) -> tuple[FlowDefinition, dict[str, dict[str, float]]]:
    """The proposed flow: one step per call, linearly chained in the observed order."""
    gen = generalize(occurrences) if occurrences else None
    steps = []
    for i, name in enumerate(tool_sequence):
        sid = f"step_{i + 1}"
        steps.append(
            FlowStep(
                id=sid,
                name=title_case(name),
                skill_key=name,
                depends_on=[f"step_{i}"] if i else [],
                output_key=sid,
                input_map=gen.input_maps[i] if gen else {},
            )
        )
    flow = FlowDefinition(
        name=flow_name_for(tool_sequence),
        description=f"Auto-generated from {observed} observed repetitions of "
        + " → ".join(tool_sequence) + ".",
        steps=steps,
        tags=["auto-generated", "flow-offload"],
        input_schema=gen.input_schema if gen else {"type": "object", "properties": {}},
        extraction=gen.extraction if gen else {},
    )
    return flow, (gen.confidence() if gen else {})


def _inside(pattern: tuple[str, ...], flow: tuple[str, ...]) -> bool:
    """True when ``pattern`` is a contiguous part of a registered flow's step sequence."""
    n = len(pattern)
    return any(flow[i : i + n] == pattern for i in range(len(flow) - n + 1))


def detect_candidates(
    store: Store,
    *,
    user_id: str,
    agent_id: str,
    config: DetectorConfig | None = None,
    save: bool = True,
) -> list[FlowCandidate]:
    """Mine the namespace's ledger and return the top candidates (stored when ``save``).

    A sequence already approved or rejected in the namespace is not proposed again, nor
    is one that lies inside a registered flow (learned or user-submitted); a pending
    candidate is refreshed in place (same id), never duplicated.
    """
    config = config or DetectorConfig()
    runs = list(store.iter_sequences(user_id=user_id, agent_id=agent_id, lookback=config.lookback_limit))
    patterns = mine_closed_patterns(
        [r.names for r in runs],
        min_length=config.min_sequence_length,
        min_support=config.min_occurrences,
    )
    decided = {
        k for k, s in store.decided_dedupe_keys(user_id=user_id, agent_id=agent_id).items()
        if s != "pending"
    }
    registered = [
        tuple(step.skill_key for step in rec.flow.steps)
        for rec in store.list_flows(user_id=user_id, agent_id=agent_id)
    ]
    scored = []
    for p in patterns:
        key = dedupe_key_for(p.names)
        if key in decided or any(_inside(p.names, flow) for flow in registered):
            continue
        avg, method = _avg_cost(p, runs)
        savings = avg * p.support * SAVINGS_FACTOR
        scored.append((savings, len(p.names) * p.support, p.support, len(p.names), p, avg, method))
    scored.sort(key=lambda s: (-s[0], -s[1], -s[2], -s[3], s[4].names))
    now = datetime.now(UTC)
    out: list[FlowCandidate] = []
    for savings, _, _, _, p, avg, method in scored[: config.max_candidates]:
        run_ids = [runs[r].run_id for r in p.runs]
        full = {r.run_id: r for r in store.load_runs(run_ids, user_id=user_id, agent_id=agent_id)}
        n = len(p.names)
        occurrences = []
        for r, pos in zip(p.runs, p.first_positions, strict=True):
            run = full.get(runs[r].run_id)
            if run is None:
                continue
            calls = run.tool_calls[pos : pos + n]
            occurrences.append(
                Occurrence(task=run.task or "", args=[c.args for c in calls], outputs=[c.output for c in calls])
            )
        flow, confidence = propose_flow(p.names, occurrences, observed=p.support)
        key = dedupe_key_for(p.names)
        exact = len(p.exact_runs) >= config.min_occurrences
        out.append(
            FlowCandidate(
                id=candidate_id_for(user_id, agent_id, key),
                user_id=user_id,
                agent_id=agent_id,
                tool_sequence=list(p.names),
                occurrence_count=p.support,
                match_type="exact" if exact else "subsequence",
                estimated_token_savings=round(savings, 4),
                avg_cost_per_execution=round(avg, 4),
                dedupe_key=key,
                proposed_flow=flow,
                run_ids=run_ids,
                savings_method=method,
                created_at=now,
                agent_prompt_hint=(
                    f"A deterministic flow '{flow.name}' is available for this pattern. Use "
                    f"flow_run('{flow.name}') instead of reasoning through these steps manually."
                ),
                argument_confidence=confidence,
            )
        )
    if save and out:
        store.save_candidates(out)
    return out
