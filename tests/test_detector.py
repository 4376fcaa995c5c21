"""Detector v1 on the real tau-bench runs and on small ledgers with known answers."""

from __future__ import annotations

import pytest
from conftest import TAU_BENCH

from soloflow_core.ledger import ingest
from soloflow_core.mining.closed import mine_closed_patterns
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig, TaskRun, ToolCall
from soloflow_core.promotion import approve_candidate, reject_candidate

NS = {"user_id": "default", "agent_id": "default"}


@pytest.fixture
def tau_store(sqlite_store):
    ingest(sqlite_store, [TAU_BENCH], default_user="default", default_agent="default")
    return sqlite_store


def test_tau_bench_ngram_counts_match_the_data_readme(tau_store):
    seqs = [r.names for r in tau_store.iter_sequences(**NS)]
    closed = mine_closed_patterns(seqs, min_length=3, min_support=3)
    # Every frequent n-gram lies inside a closed pattern with the same support, so the
    # n-grams of the closed patterns are exactly the frequent ones the README counts.
    for n, expected in [(3, 53), (4, 32), (5, 17), (6, 9)]:
        grams = {p.names[i : i + n] for p in closed for i in range(len(p.names) - n + 1)}
        assert len(grams) == expected, n
    support = {p.names: p.support for p in closed}
    grd = "get_reservation_details"
    assert support[(grd, grd, grd)] == 34
    assert support[("get_user_details", grd, grd)] == 33


def test_detect_on_tau_bench_proposes_the_repeated_sequences(tau_store):
    cands = detect_candidates(tau_store, config=DetectorConfig(max_candidates=5), **NS)
    assert len(cands) == 5
    grd = "get_reservation_details"
    seqs = [tuple(c.tool_sequence) for c in cands]
    assert (grd, grd, grd) in seqs
    assert ("get_user_details", grd, grd, grd) in seqs
    for c in cands:
        assert c.occurrence_count >= 3 and len(c.run_ids) == c.occurrence_count
        assert c.dedupe_key == "flow_offload:" + "→".join(c.tool_sequence)
        flow = c.proposed_flow
        assert flow.name == "Auto: " + " → ".join(c.tool_sequence)
        assert flow.tags == ["auto-generated", "flow-offload"]
        assert [s.skill_key for s in flow.steps] == c.tool_sequence
        assert flow.steps[0].depends_on == [] and flow.steps[1].depends_on == ["step_1"]
        assert all(s.retry_max == 2 and s.timeout_seconds == 120 and s.on_failure == "stop" for s in flow.steps)
    stored = tau_store.list_candidates(**NS)
    assert {c.id for c in stored} == {c.id for c in cands}
    again = detect_candidates(tau_store, config=DetectorConfig(max_candidates=5), **NS)
    assert [c.id for c in again] == [c.id for c in cands]  # stable ids


def _run(i: int, names: list[str], cost: float | None = None, task: str = "") -> TaskRun:
    return TaskRun(run_id=f"r{i}", task=task, cost=cost, tool_calls=[ToolCall(name=n) for n in names])


def test_savings_follow_the_design_document_formula(sqlite_store):
    runs = [_run(i, ["a", "b", "c"], cost=c) for i, c in enumerate([8.0, 10.0, 12.0])]
    runs.append(_run(9, ["x", "a", "b", "c", "y"], cost=None))
    sqlite_store.add_runs(runs)
    (cand,) = detect_candidates(sqlite_store, **NS)
    assert cand.tool_sequence == ["a", "b", "c"] and cand.occurrence_count == 4
    assert cand.avg_cost_per_execution == pytest.approx(10.0)
    assert cand.estimated_token_savings == pytest.approx(10.0 * 4 * 0.95)
    assert cand.match_type == "exact"


def test_subsequence_match_and_lookback(sqlite_store):
    sqlite_store.add_runs([_run(i, ["s", "a", "b", "c", f"t{i}"]) for i in range(3)])
    (cand,) = detect_candidates(sqlite_store, **NS)
    assert cand.tool_sequence == ["s", "a", "b", "c"] and cand.match_type == "subsequence"
    sqlite_store.add_runs([_run(10 + i, ["q", "r", "s"]) for i in range(3)])
    recent = detect_candidates(sqlite_store, config=DetectorConfig(lookback_limit=3), save=False, **NS)
    assert [c.tool_sequence for c in recent] == [["q", "r", "s"]]


def test_rejected_and_approved_are_not_proposed_again(sqlite_store):
    sqlite_store.add_runs([_run(i, ["a", "b", "c"]) for i in range(3)])
    sqlite_store.add_runs([_run(10 + i, ["x", "y", "z"]) for i in range(3)])
    cands = {tuple(c.tool_sequence): c for c in detect_candidates(sqlite_store, **NS)}
    reject_candidate(sqlite_store, cands[("a", "b", "c")].id, **NS)
    flow = approve_candidate(sqlite_store, cands[("x", "y", "z")].id, **NS)
    assert flow.version == 1
    assert detect_candidates(sqlite_store, **NS) == []


def test_max_candidates_and_namespaces(sqlite_store):
    for k in range(4):
        sqlite_store.add_runs([_run(100 * k + i, [f"a{k}", f"b{k}", f"c{k}"]) for i in range(3)])
    assert len(detect_candidates(sqlite_store, config=DetectorConfig(max_candidates=2), **NS)) == 2
    assert detect_candidates(sqlite_store, user_id="someone-else", agent_id="default") == []


def test_proposed_flow_wires_arguments(sqlite_store):
    runs = []
    for i, (email, cid) in enumerate([("a@x.io", "C1"), ("b@y.io", "C2"), ("c@z.io", "C3")]):
        runs.append(TaskRun(run_id=f"w{i}", task=f"status for {email} please", tool_calls=[
            ToolCall(name="find", args={"email": email}, output=f'{{"id": "{cid}"}}'),
            ToolCall(name="orders", args={"customer_id": cid, "limit": 5}, output=f'[{{"order": "{cid}-o"}}]'),
            ToolCall(name="track", args={"order": f"{cid}-o"}, output="ok"),
        ]))
    sqlite_store.add_runs(runs)
    (cand,) = detect_candidates(sqlite_store, **NS)
    maps = [s.input_map for s in cand.proposed_flow.steps]
    assert maps == [
        {"email": "{{_trigger.email}}"},
        {"customer_id": "{{step_1.id}}", "limit": 5},
        {"order": "{{step_2.0.order}}"},
    ]
    assert cand.proposed_flow.input_schema["required"] == ["email"]
    assert cand.proposed_flow.extraction["email"]["shape"] == "email"
    assert cand.argument_confidence["step_2"]["customer_id"] == 1.0


def test_pattern_inside_a_registered_flow_is_not_proposed(sqlite_store):
    from soloflow_core.models import FlowDefinition, FlowStep
    from soloflow_core.promotion import submit_flow

    sqlite_store.add_runs([_run(i, ["a", "b", "c"]) for i in range(3)])
    flow = FlowDefinition(name="mine", steps=[FlowStep(id=f"s{i}", skill_key=k) for i, k in enumerate("xabcy")])
    submit_flow(sqlite_store, flow, **NS)
    assert detect_candidates(sqlite_store, **NS) == []


def test_pending_candidate_is_refreshed_not_duplicated(sqlite_store):
    sqlite_store.add_runs([_run(i, ["a", "b", "c"]) for i in range(3)])
    (first,) = detect_candidates(sqlite_store, **NS)
    sqlite_store.add_runs([_run(9, ["a", "b", "c"])])
    (again,) = detect_candidates(sqlite_store, **NS)
    assert again.id == first.id and again.occurrence_count == 4
    (stored,) = sqlite_store.list_candidates(**NS)
    assert stored.occurrence_count == 4
