"""Verification before promotion: replay through the compiled LangGraph graph, fidelity,
threshold-gated automatic promotion, divergences shown to a person."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from soloflow_core.errors import SoloFlowError
from soloflow_core.generalize.align import find_occurrence
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.propose import propose
from soloflow_core.learning.promotion import auto_promote_candidate
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import TaskRun, ToolCall
from soloflow_core.testing.synthetic_ledger import generate_ledger
from soloflow_langgraph.cli import app
from soloflow_langgraph.verify import replay_occurrence, verify_candidate, verify_occurrences


def _user(uid: str, reservations: list[str]) -> str:
    return json.dumps({"user_id": uid, "reservations": reservations})


def _airline_run(n: int, reservations: list[str], *, skip_one: bool = False) -> TaskRun:
    uid = f"user_{n}"
    walked = reservations[:-1] if skip_one else reservations
    calls = [
        ToolCall(name="get_user_details", args={"user_id": uid}, output=_user(uid, reservations))
    ]
    calls += [
        ToolCall(
            name="get_reservation_details",
            args={"reservation_id": r},
            output=json.dumps({"reservation_id": r, "cabin": "economy"}),
        )
        for r in walked
    ]
    calls.append(
        ToolCall(name="send_summary", args={"user_id": uid, "channel": "email"}, output="sent")
    )
    return TaskRun(
        run_id=f"r{n}",
        user_id="u",
        agent_id="a",
        task=f"I am {uid}, list my trips",
        success=True,
        tool_calls=calls,
    )


SEQ = ["get_user_details", "get_reservation_details", "send_summary"]


def _occs(runs: list[TaskRun]) -> list[tuple[str, Occurrence]]:
    out = []
    for r in runs:
        occ = find_occurrence(r.tool_calls, SEQ, task=r.task or "")
        assert occ is not None
        out.append((r.run_id, occ))
    return out


def test_loop_of_1_and_4_repetitions_is_one_map_step_and_replays():
    runs = [_airline_run(n, [f"R{n}{k}" for k in range(1 + (n * 3) % 4)]) for n in range(9)]
    occs = _occs(runs)
    assert {len(o.step_calls[1]) for _, o in occs} >= {1, 4}
    p = propose(SEQ, [o for _, o in occs], observed=9, repeated_steps=[1])
    step = p.flow.steps[1]
    assert step.map_over == "{{step_1.reservations}}"
    assert step.input_map == {"reservation_id": "{{_item}}"}
    # user_id is in the task text and in step_1's output: upstream wins, and a note says so.
    assert p.flow.steps[2].input_map == {"user_id": "{{step_1.user_id}}", "channel": "email"}
    assert any("step_3.user_id: also in the task text" in n for n in p.notes)
    assert p.flow.steps[2].depends_on == ["step_1", "step_2"]  # no side-effects flags: order kept
    report = verify_occurrences(SEQ, occs, repeated_steps=[1])
    assert report.held_out == 3 and report.fidelity == 1.0 and report.divergences == []


def test_partial_walk_diverges_and_names_the_missing_call():
    runs = [_airline_run(n, [f"R{n}{k}" for k in range(2 + n % 2)]) for n in range(6)]
    flow = propose(SEQ, [o for _, o in _occs(runs)], observed=6).flow
    ((label, occ),) = _occs([_airline_run(7, ["X1", "X2", "X3"], skip_one=True)])
    outcome = replay_occurrence(flow, occ, label=label)
    assert not outcome.reproduced
    d, *rest = outcome.divergences
    assert d.kind == "unexpected" and d.tool == "get_reservation_details" and d.step == "step_2"
    assert d.made == {"reservation_id": "X3"}
    assert {"reservation_id": "X1"} in d.expected
    # The run stopped at the miss, so the last recorded call was never made.
    assert [(x.kind, x.tool) for x in rest] == [("missing", "send_summary")]


def test_free_inputs_come_from_the_recording_and_are_listed():
    runs = []
    for n in range(6):
        calls = [
            ToolCall(name="lookup", args={"q": f"id{n}"}, output={"id": f"x{n}"}),
            ToolCall(name="note", args={"text": f"whatever {n * 7}", "ref": f"x{n}"}, output="ok"),
        ]
        runs.append(
            TaskRun(
                run_id=f"f{n}",
                user_id="u",
                agent_id="a",
                task=f"find id{n}",
                success=True,
                tool_calls=calls,
            )
        )
    occs = [
        (r.run_id, find_occurrence(r.tool_calls, ["lookup", "note"], task=r.task or ""))
        for r in runs
    ]
    report = verify_occurrences(["lookup", "note"], occs)  # type: ignore[arg-type]
    assert report.fidelity == 1.0 and report.free_inputs == ["text"]
    assert all(o.inputs_from_recording == ["text"] for o in report.outcomes)


def test_too_few_occurrences_give_a_reason_not_a_crash():
    occs = _occs([_airline_run(n, ["A"]) for n in range(2)])
    report = verify_occurrences(SEQ, occs)
    assert report.fidelity is None and "at least 3" in report.note()


def _planted_store(store, *, seed: int = 5):
    led = generate_ledger(
        runs=160,
        workflows=2,
        seed=seed,
        noise=0.0,
        retry_rate=0.0,
        swap_rate=0.0,
        failed_run_rate=0.0,
        truncate_rate=0.0,
        min_len=3,
        max_len=5,
        planted_fraction=0.8,
    )
    store.add_runs([r.model_copy(update={"user_id": "u", "agent_id": "a"}) for r in led.runs])
    return led


def test_verify_candidate_stores_fidelity_and_auto_promotion_is_gated(sqlite_store):
    _planted_store(sqlite_store)
    cands = detect_candidates(sqlite_store, user_id="u", agent_id="a")
    assert cands
    cand, report = verify_candidate(sqlite_store, cands[0].id, user_id="u", agent_id="a")
    stored = sqlite_store.get_candidate(cands[0].id, user_id="u", agent_id="a")
    assert stored.fidelity == cand.fidelity and stored.fidelity is not None
    assert stored.verified_at is not None and stored.confidence is not None
    assert report.held_out >= 1
    assert stored.fidelity >= 0.9, stored.divergences
    with pytest.raises(SoloFlowError, match=r"within \[0, 1\]"):
        auto_promote_candidate(sqlite_store, cands[0].id, user_id="u", agent_id="a", threshold=1.01)
    flow = auto_promote_candidate(sqlite_store, cands[0].id, user_id="u", agent_id="a")
    assert flow.name == cands[0].proposed_flow.name


def test_unverified_or_low_fidelity_candidate_is_not_auto_promoted(sqlite_store):
    _planted_store(sqlite_store)
    cand = detect_candidates(sqlite_store, user_id="u", agent_id="a")[0]
    with pytest.raises(SoloFlowError, match="no replay fidelity"):
        auto_promote_candidate(sqlite_store, cand.id, user_id="u", agent_id="a")
    few = cand.model_copy(update={"fidelity": 1.0, "held_out": 2})
    sqlite_store.save_candidates([few])
    with pytest.raises(SoloFlowError, match="2 held-out occurrence"):
        auto_promote_candidate(sqlite_store, cand.id, user_id="u", agent_id="a")
    low = cand.model_copy(
        update={
            "fidelity": 0.5,
            "held_out": 3,
            "divergences": [
                {
                    "occurrence": "r9",
                    "step": "step_2",
                    "tool": cand.tool_sequence[1],
                    "kind": "unexpected",
                    "made": {"x": 1},
                    "expected": [{"x": 2}],
                    "message": "",
                }
            ],
        }
    )
    sqlite_store.save_candidates([low])
    with pytest.raises(SoloFlowError) as info:
        auto_promote_candidate(sqlite_store, cand.id, user_id="u", agent_id="a")
    assert "below the automatic-promotion threshold 90%" in str(info.value)
    assert "r9: step_2" in str(info.value) and "{'x': 1}" in str(info.value)


def test_cli_verify_and_candidates_show_fidelity(sqlite_store, sqlite_url):
    _planted_store(sqlite_store)
    cand = detect_candidates(sqlite_store, user_id="u", agent_id="a")[0]
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "--db",
            sqlite_url,
            "--user",
            "u",
            "--agent",
            "a",
            "flows",
            "verify",
            cand.id,
            "--json",
            "--promote",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["fidelity"] is not None and body["held_out"] >= 1
    assert body["promotable"] == (body["passes"] and body["held_out"] >= 3)
    assert (body["promoted"] is not None) == body["promotable"]
    res = runner.invoke(
        app,
        ["--db", sqlite_url, "--user", "u", "--agent", "a", "flows", "candidates"],
        catch_exceptions=False,
    )
    assert "fidelity" in res.stdout
