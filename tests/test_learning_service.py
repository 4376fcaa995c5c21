"""LearningService: promotion by suggestion_mode, outcomes in the store, the savings ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from soloflow_core import hookimpl
from soloflow_core.flow.fsm import RunState
from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import approve_candidate, reject_candidate
from soloflow_core.learning.service import LearningService, flow_savings
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.models import FlowCandidate, FlowDefinition, ModelCall, TaskRun, ToolCall
from soloflow_core.store import Store

U, A = "u1", "bot"
SEQ = ["get_user", "get_order", "refund"]
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def run(i: int, user: str = U, *, tokens: int = 300, cost: float | None = 0.01) -> TaskRun:
    uid, oid = f"user{i}", f"O-{i}"
    calls = [
        ToolCall(name="get_user", args={"email": f"{uid}@x.io"}, output={"id": uid}),
        ToolCall(name="get_order", args={"user_id": uid}, output={"order_id": oid}),
        ToolCall(name="refund", args={"order_id": oid}, output="ok"),
    ]
    models = [
        ModelCall(
            total_tokens=tokens // 4,
            input_tokens=tokens // 4,
            duration_ms=10,
            tool_calls_requested=1,
        )
        for _ in range(3)
    ]
    models.append(ModelCall(total_tokens=tokens - 3 * (tokens // 4), duration_ms=10))
    start = T0 + timedelta(minutes=i)
    return TaskRun(
        run_id=f"r{i}-{user}",
        user_id=user,
        agent_id=A,
        task=f"refund order for {uid}@x.io",
        success=True,
        tokens=tokens,
        cost=cost,
        tool_calls=calls,
        model_calls=models,
        started_at=start,
        ended_at=start + timedelta(seconds=2),
    )


def feed(
    service: LearningService, store: Store, n: int = 3, first: int = 0, user: str = U
) -> list[Any]:
    outcomes = []
    for i in range(first, first + n):
        r = run(i, user)
        store.add_run(r)
        outcomes.append(service.learn(r))
    return outcomes


def verifier(store: Store, fidelity: float, confidence: float = 0.95, held_out: int = 3):
    def verify(cand: FlowCandidate) -> FlowCandidate:
        updated = cand.model_copy(
            update={
                "fidelity": fidelity,
                "confidence": confidence,
                "held_out": held_out,
                "verified_at": datetime.now(UTC),
            }
        )
        store.save_candidates([updated])
        return updated

    return verify


class Promoted:
    def __init__(self) -> None:
        self.flows: list[FlowDefinition] = []

    @hookimpl
    def soloflow_flow_promoted(self, flow: FlowDefinition) -> None:
        self.flows.append(flow)


@pytest.fixture
def promoted(pm):
    plugin = Promoted()
    pm.register(plugin)
    try:
        yield plugin
    finally:
        pm.unregister(plugin)


def service(
    store: Store,
    pm: Any = None,
    *,
    mode: str = "manual",
    fidelity: float = 1.0,
    side_effects: dict[str, bool] | None = None,
    **config: Any,
) -> LearningService:
    cfg = LearningConfig(suggestion_mode=mode, learning_timeout=60, **config)  # type: ignore[arg-type]
    return LearningService(
        store, cfg, pm, verify=verifier(store, fidelity), side_effects=side_effects
    )


# --------------------------------------------------------------------------- promotion


def test_manual_leaves_the_candidate_pending(sqlite_store: Store, pm, promoted):
    outcomes = feed(service(sqlite_store, pm), sqlite_store)
    assert [len(o.proposed) for o in outcomes] == [0, 0, 1]
    (cand,) = outcomes[-1].proposed
    assert cand.tool_sequence == SEQ and cand.fidelity == 1.0  # verified, for the person
    assert outcomes[-1].pending == (cand.id,) and outcomes[-1].promoted == ()
    assert sqlite_store.get_candidate(cand.id, user_id=U, agent_id=A).status == "pending"
    assert sqlite_store.list_flow_meta(user_id=U, agent_id=A) == [] and promoted.flows == []


def test_automatic_promotes_when_fidelity_and_confidence_pass(sqlite_store: Store, pm, promoted):
    svc = service(sqlite_store, pm, mode="automatic")
    (flow,) = feed(svc, sqlite_store)[-1].promoted
    assert [f.name for f in promoted.flows] == [flow.name]  # soloflow_flow_promoted fired
    meta = sqlite_store.get_flow_meta(flow.name, user_id=U, agent_id=A)
    assert meta.source == "auto-learned" and meta.status == "active"
    # Beta(1 + 3·1.0, 1): the three held-out replays count as three executions.
    assert meta.confidence == pytest.approx(4 / 5)
    assert svc.stats(U, A, flow.name).prior_alpha == 4.0


def test_automatic_promotion_needs_three_held_out_occurrences(sqlite_store: Store, pm, promoted):
    svc = LearningService(
        sqlite_store,
        LearningConfig(suggestion_mode="automatic", learning_timeout=60),
        pm,
        verify=verifier(sqlite_store, 1.0, held_out=2),
    )
    last = feed(svc, sqlite_store)[-1]
    assert last.promoted == () and len(last.pending) == 1 and promoted.flows == []
    assert "2 held-out occurrence(s)" in last.notes[0] and "at least 3" in last.notes[0]


@pytest.mark.parametrize(("fidelity", "confidence"), [(0.5, 0.95), (1.0, 0.5)])
def test_automatic_leaves_a_weak_candidate_to_a_person(
    sqlite_store: Store, pm, promoted, fidelity: float, confidence: float
):
    svc = LearningService(
        sqlite_store,
        LearningConfig(suggestion_mode="automatic", learning_timeout=60),
        pm,
        verify=verifier(sqlite_store, fidelity, confidence),
    )
    last = feed(svc, sqlite_store)[-1]
    assert last.promoted == () and len(last.pending) == 1 and promoted.flows == []


def test_without_verification_nothing_is_promoted_automatically(sqlite_store: Store, pm):
    svc = LearningService(
        sqlite_store, LearningConfig(suggestion_mode="automatic", learning_timeout=60), pm
    )
    last = feed(svc, sqlite_store)[-1]
    assert last.promoted == () and len(last.pending) == 1


def test_hybrid_promotes_read_only_flows_and_asks_for_the_others(sqlite_store: Store, pm, promoted):
    read_only = {"get_user": False, "get_order": False, "refund": False}
    (flow,) = feed(service(sqlite_store, pm, mode="hybrid", side_effects=read_only), sqlite_store)[
        -1
    ].promoted
    assert promoted.flows == [flow]
    # Another namespace, where refund changes the world (unknown counts as side-effecting).
    svc = service(
        sqlite_store, pm, mode="hybrid", side_effects={"get_user": False, "get_order": False}
    )
    last = feed(svc, sqlite_store, user="u2")[-1]
    assert last.promoted == () and len(last.pending) == 1
    assert "side effects" in last.notes[0]
    assert promoted.flows == [flow]


def test_side_effects_read_from_the_recorded_calls(sqlite_store: Store):
    svc = service(sqlite_store, mode="hybrid")
    runs = []
    for i in range(3):
        r = run(i)
        r = r.model_copy(
            update={
                "tool_calls": [
                    c.model_copy(update={"meta": {"read_only": True}}) for c in r.tool_calls
                ]
            }
        )
        runs.append(r)
        sqlite_store.add_run(r)
        last = svc.learn(r)
    assert len(last.promoted) == 1


def test_a_rejected_dedupe_key_is_not_proposed_again(sqlite_store: Store):
    (cand,) = feed(service(sqlite_store), sqlite_store)[-1].proposed
    reject_candidate(sqlite_store, cand.id, user_id=U, agent_id=A)
    # More runs, the same service, and a fresh one (a restarted process): never again.
    assert all(o.proposed == () for o in feed(service(sqlite_store), sqlite_store, n=3, first=3))
    fresh = service(sqlite_store)
    assert all(o.proposed == () for o in feed(fresh, sqlite_store, n=3, first=6))
    keys = [c.dedupe_key for c in sqlite_store.list_candidates(user_id=U, agent_id=A)]
    assert keys == [cand.dedupe_key]


def test_on_run_finished_is_bounded_and_a_plugin(sqlite_store: Store, pm):
    svc = service(sqlite_store, pm)
    pm.register(svc)
    try:
        for i in range(3):
            r = run(i)
            sqlite_store.add_run(r)
            pm.hook.soloflow_run_finished(run=r)  # as the capture handler calls it
    finally:
        pm.unregister(svc)
    assert len(sqlite_store.list_candidates(user_id=U, agent_id=A)) == 1
    failed = run(9).model_copy(update={"success": False})
    attempt = svc.on_run_finished(failed)
    assert attempt.status == "done" and not attempt.value.decision  # type: ignore[union-attr]


# --------------------------------------------------------------------------- outcomes


def approved(store: Store, svc: LearningService) -> str:
    (cand,) = feed(svc, store)[-1].proposed
    return approve_candidate(store, cand.id, user_id=U, agent_id=A).name


def test_outcomes_demote_then_retire_through_the_store(sqlite_store: Store):
    svc = service(sqlite_store)
    name = approved(sqlite_store, svc)
    assert svc.stats(U, A, name).confidence == pytest.approx(5 / 6)  # from the fidelity
    statuses = [
        svc.record_outcome(U, A, name, success=s).status for s in (True, True, False, False, False)
    ]
    assert statuses == ["active"] * 4 + ["suggestion_only"]
    meta = sqlite_store.get_flow_meta(name, user_id=U, agent_id=A)
    assert (meta.success_count, meta.total_executions, meta.status) == (2, 5, "suggestion_only")
    assert meta.confidence == pytest.approx((5 + 2) / (6 + 5))
    # Still found, as a suggestion; three more failures retire it: found no more.
    (match,) = ProceduralMemory(sqlite_store).find_workflow(U, A, "refund order for user1@x.io")
    assert match.status == "suggestion_only"
    for _ in range(3):
        last = svc.record_outcome(U, A, name, success=False)
    assert last.status == "retired"
    assert sqlite_store.get_flow_meta(name, user_id=U, agent_id=A).status == "retired"
    assert ProceduralMemory(sqlite_store).find_workflow(U, A, "refund order for user1@x.io") == []


def test_record_result_counts_completed_failed_and_fallback_only(sqlite_store: Store):
    from types import SimpleNamespace

    svc = service(sqlite_store)
    name = approved(sqlite_store, svc)
    for status in ("completed", "fallback", "cancelled", "waiting", "failed"):
        svc.record_result(SimpleNamespace(flow=name, status=status), user_id=U, agent_id=A)
    meta = sqlite_store.get_flow_meta(name, user_id=U, agent_id=A)
    assert (meta.success_count, meta.total_executions) == (1, 3)


def test_a_user_submitted_flow_starts_vouched_for(sqlite_store: Store):
    from soloflow_core.learning.promotion import submit_flow
    from soloflow_core.models import FlowStep

    flow = FlowDefinition(name="mine", steps=[FlowStep(id="s", skill_key="get_user")])
    submit_flow(sqlite_store, flow, user_id=U, agent_id=A)
    svc = service(sqlite_store)
    assert svc.stats(U, A, "mine").confidence == 1.0
    assert svc.record_outcome(U, A, "mine", success=False).confidence == pytest.approx(4 / 5)


# --------------------------------------------------------------------------- savings


def test_savings_measured_against_the_agent_runs_and_beside_the_estimate(sqlite_store: Store):
    store = sqlite_store
    svc = service(store)
    name = approved(store, svc)
    flow = store.get_flow(name, user_id=U, agent_id=A).flow
    for state in (RunState.COMPLETED, RunState.COMPLETED, RunState.FAILED):
        rid = store.start_flow_run(flow, {}, user_id=U, agent_id=A)
        store.finish_flow_run(rid, status=state)
    (s,) = svc.savings(U, A)
    assert s.flow == name and s.candidate_id is not None
    assert (s.agent.runs, s.agent.model_calls, s.agent.tokens) == (3, 4.0, 300.0)
    assert s.agent.cost == pytest.approx(0.01) and s.agent.latency_ms == pytest.approx(2000.0)
    assert (s.flow_runs.runs, s.flow_runs.model_calls, s.flow_runs.tokens) == (3, 0.0, 0.0)
    assert s.completed_runs == 2
    assert (s.saved_per_run.model_calls, s.saved_per_run.tokens) == (4.0, 300.0)
    assert (s.saved_total.model_calls, s.saved_total.tokens) == (8.0, 600.0)
    assert s.saved_total.cost == pytest.approx(0.02)
    assert s.saved_per_run.latency_ms is not None and s.saved_per_run.latency_ms > 1000
    cand = store.get_candidate(s.candidate_id, user_id=U, agent_id=A)
    assert s.estimated_token_savings == cand.estimated_token_savings
    assert s.savings_method == cand.savings_method
    assert flow_savings(store, "someone else", A) == []
    assert s.as_dict()["saved_total"]["tokens"] == 600.0
