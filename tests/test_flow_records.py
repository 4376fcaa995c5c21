"""Confidence that means something: every execution path counts, the agent's own runs of a
flow's job are evidence, a person's approval gives the documented prior, capacity holds.

Real stores (both), a real ``FlowRuntime``, the CLI in process, a flow as a LangChain tool.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from langchain_core.tools import tool
from typer.testing import CliRunner

from soloflow_core.errors import FlowValidationError, SoloFlowError
from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import approve_candidate, submit_flow
from soloflow_core.learning.records import flow_stats, flows_done_by, record_agent_run
from soloflow_core.models import FlowCandidate, FlowDefinition, FlowStep, TaskRun, ToolCall
from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.routing.hints import OfferedFlows
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "u", "agent_id": "a"}
CALLS: list[str] = []


@tool
def get_user(email: str) -> str:
    """Look up a user."""
    CALLS.append("get_user")
    if "@" not in email:
        raise ValueError(f"no user {email!r}")
    return json.dumps({"id": email.split("@")[0]})


@tool
def refund(user_id: str) -> str:
    """Refund a user's last order."""
    CALLS.append("refund")
    return "ok"


TOOLS = [get_user, refund]
FLOW = FlowDefinition(
    name="Refund",
    steps=[
        FlowStep(
            id="u", skill_key="get_user", input_map={"email": "{{_trigger.email}}"}, retry_max=0
        ),
        FlowStep(id="r", skill_key="refund", depends_on=["u"], input_map={"user_id": "{{u.id}}"}),
    ],
    input_schema={
        "type": "object",
        "properties": {"email": {"type": "string"}},
        "required": ["email"],
    },
)


def _counts(store: Store) -> tuple[int, int]:
    meta = store.get_flow_meta("Refund", **NS)
    return meta.success_count, meta.total_executions


def test_every_way_of_running_a_registered_flow_counts(store: Store, db_url: str):
    submit_flow(store, FLOW, **NS)
    with FlowRuntime(store, tools=TOOLS, **NS) as runtime:  # directly
        assert runtime.run("Refund", {"email": "a@x.io"}).status == "completed"
        assert runtime.run("Refund", {"email": "no-at-sign"}).status == "failed"
    assert _counts(store) == (1, 2)
    flows = OfferedFlows(
        store, tools=TOOLS, runtime=None, pm=None, min_confidence=0.0, limit=3, **NS
    )
    assert flows.flow_run_tool().invoke({"name": "Refund", "inputs": {"email": "b@x.io"}}) == "ok"
    (typed,) = flows.typed_tools()
    assert typed.invoke({"email": "c@x.io"}) == "ok"  # a flow as the agent's tool
    assert _counts(store) == (3, 4)
    res = CliRunner().invoke(
        app,
        [
            "--db",
            db_url,
            "--user",
            "u",
            "--agent",
            "a",
            "flows",
            "run",
            "Refund",
            "--input",
            '{"email": "d@x.io"}',
            "--tools",
            "tests.test_flow_records:TOOLS",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert _counts(store) == (4, 5)
    # Inputs refused before any step ran are not the flow's failure.
    with FlowRuntime(store, tools=TOOLS, **NS) as runtime, pytest.raises(FlowValidationError):
        runtime.run("Refund", {"email": 42})
    assert _counts(store) == (4, 5)


def test_a_person_approving_gives_the_approval_prior_whatever_the_replay_measured(store: Store):
    cand = FlowCandidate(
        id="cand_x",
        user_id="u",
        agent_id="a",
        tool_sequence=["get_user", "refund"],
        occurrence_count=3,
        match_type="exact",
        estimated_token_savings=1.0,
        avg_cost_per_execution=1.0,
        dedupe_key="flow_offload:get_user→refund",
        proposed_flow=FLOW,
        run_ids=[],
        fidelity=0.0,
        held_out=3,
    )
    store.save_candidates([cand])
    approve_candidate(store, cand.id, **NS)
    stats = flow_stats(store, "Refund", **NS)
    assert stats.confidence == pytest.approx(5 / 6)
    assert stats.prior_alpha == 5.0 and stats.prior_beta == 1.0


def _agent_run(i: int, calls: list[ToolCall], success: bool | None = True) -> TaskRun:
    at = datetime(2026, 11, 1, tzinfo=UTC)
    return TaskRun(
        run_id=f"agent-{i}",
        task=f"please refund me, user{i}@x.io",
        success=success,
        tool_calls=calls,
        started_at=at,
        ended_at=at,
        **NS,
    )


def _did(i: int) -> list[ToolCall]:
    return [
        ToolCall(name="get_user", args={"email": f"user{i}@x.io"}, output={"id": f"user{i}"}),
        ToolCall(name="refund", args={"user_id": f"user{i}"}, output="ok"),
    ]


def test_agent_runs_of_the_flows_sequence_bring_a_flow_back(store: Store):
    config = LearningConfig()
    submit_flow(store, FLOW, **NS)
    with FlowRuntime(store, tools=TOOLS, learning_config=config, **NS) as runtime:
        runtime.run("Refund", {"email": "no-at-sign"})  # one bad input set
    before = flow_stats(store, "Refund", **NS).confidence
    assert before == pytest.approx(4 / 5) and before < 0.85
    run = _agent_run(1, _did(1))
    store.add_run(run)
    assert record_agent_run(store, run) == ["Refund"]
    after = flow_stats(store, "Refund", **NS)
    assert after.agent_successes == 1 and after.total_executions == 1
    assert after.confidence == pytest.approx(5 / 6)
    assert store.flow_evidence(["Refund"], **NS)["Refund"] == [run.task]
    # The same run again adds no evidence twice (its id is known), runs that did not do the
    # whole sequence, or failed, credit nothing.
    store.add_flow_evidence("Refund", [(run.run_id, run.task or "")], source="agent_run", **NS)
    assert len(store.flow_evidence(["Refund"], **NS)["Refund"]) == 1
    assert store.flow_evidence_sources(["Refund"], **NS)["Refund"] == [(run.task, "agent_run")]
    partial = _agent_run(2, _did(2)[:1])
    failed = _agent_run(3, _did(3), success=False)
    broken = _agent_run(4, [_did(4)[0].model_copy(update={"error": True}), _did(4)[1]])
    for r in (partial, failed, broken):
        assert record_agent_run(store, r) == []
    assert flow_stats(store, "Refund", **NS).agent_successes == 1


def test_a_retried_call_still_does_the_sequence():
    calls = _did(5)
    retried = [calls[0].model_copy(update={"error": True}), *calls]
    assert flows_done_by(_agent_run(5, retried), [FLOW]) == ["Refund"]
    # One stray call between two steps, as verification and mining tolerate it: the steps
    # still worked. Two, or a failure not retried, and it is not the flow's sequence.
    stray = [calls[0], ToolCall(name="unrelated"), calls[1]]
    assert flows_done_by(_agent_run(6, stray), [FLOW]) == ["Refund"]
    two = [calls[0], ToolCall(name="unrelated"), ToolCall(name="other"), calls[1]]
    assert flows_done_by(_agent_run(7, two), [FLOW]) == []
    failed = [calls[0], ToolCall(name="unrelated", error=True), calls[1]]
    assert flows_done_by(_agent_run(8, failed), [FLOW]) == []


def test_a_stray_call_credits_the_confidence_but_is_no_evidence_of_the_job(store: Store):
    """The run did more than the job (a stray lookup): its steps count in the confidence,
    its task text is not taught to routing as the flow's job."""
    submit_flow(store, FLOW, **NS)
    calls = _did(9)
    run = _agent_run(9, [calls[0], ToolCall(name="weather", args={"city": "Oslo"}), calls[1]])
    store.add_run(run)
    assert record_agent_run(store, run) == ["Refund"]
    assert flow_stats(store, "Refund", **NS).agent_successes == 1
    assert store.flow_evidence(["Refund"], **NS).get("Refund", []) == []


def _candidate(store: Store, name: str, i: int) -> FlowCandidate:
    flow = FLOW.model_copy(update={"name": name})
    cand = FlowCandidate(
        id=f"cand_{i}",
        user_id="u",
        agent_id="a",
        tool_sequence=["get_user", "refund"],
        occurrence_count=3,
        match_type="exact",
        estimated_token_savings=1.0,
        avg_cost_per_execution=1.0,
        dedupe_key=f"flow_offload:{name}",
        proposed_flow=flow,
        run_ids=[],
    )
    store.save_candidates([cand])
    return cand


def test_max_workflows_per_agent_evicts_learned_flows_and_never_a_persons(store: Store):
    config = LearningConfig(max_workflows_per_agent=2)
    submit_flow(store, FLOW.model_copy(update={"name": "Mine"}), **NS)
    approve_candidate(store, _candidate(store, "Learned 1", 1).id, config=config, **NS)
    approve_candidate(store, _candidate(store, "Learned 2", 2).id, config=config, **NS)
    names = sorted(m.name for m in store.list_flow_meta(**NS))
    assert names == ["Learned 2", "Mine"]  # the older learned flow made room
    assert store.flow_evidence(["Learned 1"], **NS)["Learned 1"] == []
    submit_flow(store, FLOW.model_copy(update={"name": "Mine too"}), **NS)
    # Only a person's flows would be left to evict: the learned flow is refused.
    with pytest.raises(SoloFlowError, match="max_workflows_per_agent=2"):
        approve_candidate(
            store,
            _candidate(store, "Learned 3", 3).id,
            config=LearningConfig(max_workflows_per_agent=2),
            **NS,
        )
    assert "Learned 3" not in {m.name for m in store.list_flow_meta(**NS)}


def test_a_run_that_did_more_than_the_job_is_no_evidence_of_it(store: Store):
    submit_flow(store, FLOW, **NS)
    more = _agent_run(7, [ToolCall(name="cancel_subscription", args={}), *_did(7)])
    assert record_agent_run(store, more) == ["Refund"]  # the steps worked: a success...
    assert store.flow_evidence(["Refund"], **NS)["Refund"] == []  # ...but not its job's words
    assert flow_stats(store, "Refund", **NS).agent_successes == 1
    tool = _agent_run(
        8,
        [
            ToolCall(
                name="soloflow_refund",
                args={"email": "a@x.io"},
                output="ok",
                meta={"soloflow_flow": "Refund"},
            )
        ],
    )
    assert record_agent_run(store, tool) == ["Refund"]  # the model chose the flow: its job
    assert store.flow_evidence(["Refund"], **NS)["Refund"] == [tool.task]
    assert (
        flow_stats(store, "Refund", **NS).agent_successes == 1
    )  # the flow's own run counts itself


def test_a_flow_that_keeps_failing_stops_running_unasked_until_it_succeeds(store: Store):
    from soloflow_core.learning.outcomes import may_auto_execute

    config = LearningConfig(auto_execute=True, confidence_threshold=0.5)
    submit_flow(store, FLOW, **NS)
    with FlowRuntime(store, tools=TOOLS, learning_config=config, **NS) as runtime:
        runtime.run("Refund", {"email": "bad"})
        assert may_auto_execute(flow_stats(store, "Refund", **NS), config)  # one failure: still
        runtime.run("Refund", {"email": "bad"})
        for i in range(5):  # the agent doing the job itself does not bring it back
            record_agent_run(store, _agent_run(20 + i, _did(20 + i)))
        stats = flow_stats(store, "Refund", **NS)
        assert stats.confidence > config.confidence_threshold and not may_auto_execute(
            stats, config
        )
        runtime.run("Refund", {"email": "good@x.io"})  # an execution that succeeds does
    assert may_auto_execute(flow_stats(store, "Refund", **NS), config)


def test_outcomes_from_several_processes_are_never_lost(store: Store, db_url: str):
    import threading

    submit_flow(store, FLOW, **NS)
    config = LearningConfig()
    from soloflow_core.learning.records import record_flow_outcome

    def worker(k: int) -> None:
        with Store.open(db_url) as own:  # its own engine and connections, as a process has
            for i in range(10):
                record_flow_outcome(own, "Refund", success=(i + k) % 3 != 0, config=config, **NS)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = flow_stats(store, "Refund", **NS)
    assert stats.total_executions == 40
    assert stats.success_count == sum((i + k) % 3 != 0 for k in range(4) for i in range(10))


def test_flows_whose_text_scores_tie_are_offered_best_quality_first(store: Store):
    config = LearningConfig()
    for name in ("Refund flow one", "Refund flow two"):
        submit_flow(store, FLOW.model_copy(update={"name": name}), **NS)
    with FlowRuntime(store, tools=TOOLS, learning_config=config, **NS) as runtime:
        for i in range(3):  # the same record; "two" served three people, "one" one of them
            runtime.run("Refund flow two", {"email": f"p{i}@x.io"})
            runtime.run("Refund flow one", {"email": "p0@x.io"})
    flows = OfferedFlows(
        store, tools=TOOLS, runtime=None, pm=None, min_confidence=0.0, limit=3, **NS
    )
    found = flows.find("refund flow please")
    assert found[0].score == found[1].score  # a tie by their words and records...
    assert [m.name for m in found] == ["Refund flow two", "Refund flow one"]  # ...quality decides
