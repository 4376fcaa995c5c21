"""The quality score: its four formulas, measured on a real store (both databases), and the
order of suggestions whose text scores tie."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st
from serve_helpers import TOOLS, learn_demo_flow, submit

from soloflow_core.learning.quality import (
    HALF_AGE_DAYS,
    QualityEvidence,
    flow_quality,
    order_ties_by_quality,
    quality_score,
    saturate,
)
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.store import Store
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

counts = st.integers(min_value=0, max_value=10_000)


@given(
    confidence=st.floats(0, 1),
    uses=counts,
    age=st.floats(0, 10_000),
    verified=counts,
    tasks=counts,
    inputs=counts,
    saved=st.dictionaries(
        st.sampled_from(["model_calls", "tokens", "latency_ms"]), st.floats(0, 1)
    ),
)
def test_every_dimension_is_within_0_and_1_and_overall_is_their_mean(
    confidence: float,
    uses: int,
    age: float,
    verified: int,
    tasks: int,
    inputs: int,
    saved: dict[str, float],
) -> None:
    q = quality_score(
        QualityEvidence(
            confidence=confidence,
            uses=uses,
            age_days=age,
            verified_occurrences=verified,
            distinct_tasks=tasks,
            distinct_inputs=inputs,
            saved=saved,
        )
    )
    dims = [q.reliability, q.efficiency, q.maturity, q.reusability]
    assert all(0.0 <= d <= 1.0 for d in dims)
    assert abs(q.overall - sum(dims) / 4) <= 1e-4


@given(uses=counts, more=st.integers(1, 1000), tasks=counts, more_tasks=st.integers(1, 1000))
def test_more_evidence_never_lowers_maturity_or_reusability(
    uses: int, more: int, tasks: int, more_tasks: int
) -> None:
    base = dict(confidence=0.5, age_days=3.0, verified_occurrences=2, distinct_inputs=4)
    lo = quality_score(QualityEvidence(uses=uses, distinct_tasks=tasks, **base))  # type: ignore[arg-type]
    hi = quality_score(QualityEvidence(uses=uses + more, distinct_tasks=tasks + more_tasks, **base))  # type: ignore[arg-type]
    assert hi.maturity >= lo.maturity and hi.reusability >= lo.reusability


def test_the_formulas_at_their_half_points() -> None:
    assert saturate(10, 10) == 0.5 and saturate(0, 10) == 0.0 and saturate(-3, 10) == 0.0
    q = quality_score(
        QualityEvidence(
            confidence=0.8,
            uses=10,
            age_days=HALF_AGE_DAYS,
            verified_occurrences=5,
            distinct_tasks=5,
            distinct_inputs=10,
            saved={"tokens": 0.9, "latency_ms": 0.5},
        )
    )
    assert (q.reliability, q.efficiency, q.maturity, q.reusability) == (0.8, 0.7, 0.5, 0.5)
    assert q.overall == 0.625


def test_a_learned_flow_is_measured_from_its_store(store: Store) -> None:
    flow = learn_demo_flow(store, "ann", "bot")
    meta = store.get_flow_meta(flow.name, user_id="ann", agent_id="bot")
    fresh = flow_quality(store, meta, user_id="ann", agent_id="bot")
    assert fresh.evidence.verified_occurrences == 5  # fidelity 1.0 over its 5 occurrences
    assert fresh.evidence.distinct_tasks == 5 and fresh.evidence.distinct_inputs == 0
    assert (
        fresh.efficiency == 0.0 and fresh.evidence.saved == {}
    )  # no flow run yet: nothing measured
    with FlowRuntime(store, tools=TOOLS, user_id="ann", agent_id="bot") as runtime:
        for email in ("alice@example.com", "bob@example.org", "alice@example.com"):
            assert runtime.run(flow.name, {"email": email}).status == "completed"
    used = flow_quality(
        store, meta, user_id="ann", agent_id="bot", at=meta.created_at + timedelta(days=30)
    )
    assert used.evidence.distinct_inputs == 2
    # A flow run makes no model call where the agent made five per run: every call, every token saved.
    assert used.evidence.saved["model_calls"] == 1.0 and used.evidence.saved["tokens"] == 1.0
    assert used.efficiency > 0.6 and used.reusability > fresh.reusability
    assert used.evidence.age_days == 30.0 and used.maturity > fresh.maturity


def test_a_user_flow_has_no_measured_efficiency_and_no_verified_occurrences(store: Store) -> None:
    flow = submit(
        store,
        "ann",
        "bot",
        {
            "name": "lookup",
            "steps": [
                {
                    "id": "s",
                    "skill_key": "find_customer",
                    "input_map": {"email": "{{_trigger.email}}"},
                }
            ],
        },
    )
    meta = store.get_flow_meta(flow.name, user_id="ann", agent_id="bot")
    q = flow_quality(store, meta, user_id="ann", agent_id="bot")
    assert q.reliability == 1.0 and q.efficiency == 0.0 and q.evidence.verified_occurrences == 0


@dataclass
class _Match:
    name: str
    text_score: float
    outranks: tuple[str, ...] = field(default_factory=tuple)


def test_suggestions_that_tie_on_text_are_ordered_by_quality() -> None:
    matches = [
        _Match("a", 0.9),
        _Match("b", 0.7),
        _Match("c", 0.7),
        _Match("d", 0.7),
        _Match("e", 0.5),
    ]
    quality = {"a": 0.1, "b": 0.2, "c": 0.9, "d": 0.5, "e": 1.0}
    ordered = order_ties_by_quality(matches, lambda m: quality[m.name])
    assert [m.name for m in ordered] == ["a", "c", "d", "b", "e"]  # only the tie moved


def test_a_user_flow_stays_above_the_learned_flow_it_outranks() -> None:
    matches = [_Match("user", 0.7, ("learned",)), _Match("learned", 0.7), _Match("other", 0.7)]
    quality = {"user": 0.1, "learned": 0.9, "other": 0.5}
    ordered = order_ties_by_quality(matches, lambda m: quality[m.name])
    assert [m.name for m in ordered] == ["user", "learned", "other"]


def test_flows_find_orders_a_text_tie_by_quality(store: Store, db_url: str) -> None:
    import json

    from typer.testing import CliRunner

    from soloflow_langgraph.cli import app

    for name in ("alpha", "beta"):
        ProceduralMemory(store).submit_workflow(
            "ann",
            "bot",
            {
                "name": name,
                "description": "Track a shipment.",
                "steps": [
                    {
                        "id": "s",
                        "skill_key": "track_shipment",
                        "input_map": {"order_id": "{{_trigger.order_id}}"},
                    }
                ],
            },
            trigger_keywords=["track", "shipment"],
        )
    with FlowRuntime(store, tools=TOOLS, user_id="ann", agent_id="bot") as runtime:
        for order in ("O-5001", "O-5002", "O-5003"):
            assert runtime.run("beta", {"order_id": order}).status == "completed"
    res = CliRunner().invoke(
        app,
        [
            "--db",
            db_url,
            "--user",
            "ann",
            "--agent",
            "bot",
            "flows",
            "find",
            "track shipment O-5004",
            "--json",
        ],
    )
    alpha, beta = sorted(json.loads(res.stdout), key=lambda m: m["name"])
    assert (
        alpha["text_score"] == beta["text_score"]
    )  # a tie on the text: the name alone would put alpha first
    assert beta["quality"]["overall"] > alpha["quality"]["overall"]
    assert [m["name"] for m in json.loads(res.stdout)] == ["beta", "alpha"]
