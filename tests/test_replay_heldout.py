"""Replay on held-out real runs: a read-only step the agent repeated (several lookups before
one cancellation) is made once by the flow; side-effecting repeats are all required.

Real τ-bench GPT-4o airline runs (tests/data): the flow is generalised from trials 0–1 and
replayed against trial 2, as ``benchmarks/bench_replay.py`` does."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from soloflow_core.generalize.align import find_occurrences
from soloflow_core.generalize.propose import propose
from soloflow_core.ledger import parse_record
from soloflow_core.models import TaskRun, ToolCall
from soloflow_langgraph.verify import replay_occurrence, verify_flow, verify_occurrences

TAU = Path(__file__).parent / "data" / "tau_bench_gpt-4o_airline_trials0-2.jsonl.gz"
CANCEL = ("get_user_details", "get_reservation_details", "cancel_reservation")
READ_ONLY = {"get_user_details": False, "get_reservation_details": False}
EFFECTS = {**READ_ONLY, "cancel_reservation": True}


@pytest.fixture(scope="module")
def tau_runs() -> dict[int, list[TaskRun]]:
    by_trial: dict[int, list[TaskRun]] = {0: [], 1: [], 2: []}
    with gzip.open(TAU, "rt") as f:
        for line in f:
            rec = json.loads(line)
            run = parse_record(rec, default_user="u", default_agent="a")
            by_trial[rec["meta"]["trial"]].append(run)
    return by_trial


def _cancel_flow(tau_runs: dict[int, list[TaskRun]]):
    train = [o for _, o in find_occurrences(tau_runs[0] + tau_runs[1], CANCEL)]
    assert len(train) == 11
    return propose(CANCEL, train, observed=len(train), side_effects=EFFECTS).flow


def _held(tau_runs: dict[int, list[TaskRun]], task: int):
    ((label, occ),) = [
        (lab, o)
        for lab, o in find_occurrences(tau_runs[2], CANCEL)
        if lab.endswith(f"/task{task}/trial2")
    ]
    return label, occ


def test_repeated_read_only_lookups_need_one_call(tau_runs):
    """task25, trial 2: three reservation lookups, then one cancellation. The flow looks up
    one (the one the step was learned from: the last) and cancels; the two other lookups are
    counted, not divergences."""
    flow = _cancel_flow(tau_runs)
    label, occ = _held(tau_runs, 25)
    assert len(occ.step_calls[1]) == 3
    outcome = replay_occurrence(flow, occ, label=label, side_effects=EFFECTS)
    assert outcome.reproduced, [d.to_dict() for d in outcome.divergences]
    assert outcome.repeats_not_made == 2
    # The free input is the recorded value of the call the step was learned from (its last).
    assert outcome.inputs["reservation_id"] == occ.step_calls[1][-1].args["reservation_id"]


def test_unknown_side_effects_require_every_repeat(tau_runs):
    """Without the tools' side effects (none declared, none in the calls' metadata), every
    recorded lookup must be made: the strict replay of the same run fails on the two others."""
    flow = _cancel_flow(tau_runs)
    label, occ = _held(tau_runs, 25)
    outcome = replay_occurrence(flow, occ, label=label)
    assert not outcome.reproduced and outcome.repeats_not_made == 0
    missed = [(d.kind, d.tool, d.expected["reservation_id"]) for d in outcome.divergences]
    made = occ.step_calls[1][-1].args["reservation_id"]
    assert sorted(missed) == sorted(
        ("missing", "get_reservation_details", c.args["reservation_id"])
        for c in occ.step_calls[1]
        if c.args["reservation_id"] != made
    )


def test_repeated_side_effecting_step_is_still_required(tau_runs):
    """task29, trial 2: the agent cancelled two reservations; a flow that cancels one did
    less than the run, whatever the lookups: not reproduced, the other cancellation named."""
    flow = _cancel_flow(tau_runs)
    label, occ = _held(tau_runs, 29)
    cancels = [c.args["reservation_id"] for c in occ.step_calls[2]]
    assert len(cancels) == 2
    outcome = replay_occurrence(flow, occ, label=label, side_effects=EFFECTS)
    assert not outcome.reproduced
    assert [(d.kind, d.tool, d.expected) for d in outcome.divergences] == [
        ("missing", "cancel_reservation", {"reservation_id": cancels[0]})
    ]
    assert outcome.repeats_not_made == len(occ.step_calls[1]) - 1


def test_held_out_trial_fidelity_with_and_without_side_effects(tau_runs):
    """All six trial-2 occurrences of the cancel pattern: 5 reproduced with the tools' side
    effects (task29's second cancellation is the miss), 2 when every repeat is required."""
    flow = _cancel_flow(tau_runs)
    held = find_occurrences(tau_runs[2], CANCEL)
    assert len(held) == 6
    strict = verify_flow(flow, held, trained_on=11)
    known = verify_flow(flow, held, trained_on=11, side_effects=EFFECTS)
    assert sum(o.reproduced for o in strict.outcomes) == 2
    assert sum(o.reproduced for o in known.outcomes) == 5
    assert known.repeats_not_made == 18
    assert "18 repeated read-only call(s)" in known.note()


def _lookup_run(n: int, *, read_only_meta: bool) -> TaskRun:
    """Look up the customer, then the order — in odd runs a mistyped order first — and refund."""
    meta = {"read_only": True} if read_only_meta else {}
    order = f"ORD-{n}{n}7"
    looked = [f"ORD-{n}{n}1", order] if n % 2 else [order]
    calls = [
        ToolCall(
            name="find_customer",
            args={"email": f"c{n}@x.com"},
            output={"name": f"Customer {n}"},
            meta=meta,
        ),
        *(
            ToolCall(
                name="get_order",
                args={"order_id": i},
                output={"order_id": i, "refundable": i == order},
                meta=meta,
            )
            for i in looked
        ),
        ToolCall(name="refund", args={"order_id": order}, output="done"),
    ]
    return TaskRun(
        run_id=f"r{n}",
        user_id="u",
        agent_id="a",
        task=f"refund order {order} of c{n}@x.com",
        success=True,
        tool_calls=calls,
    )


@pytest.mark.parametrize("read_only_meta", [True, False])
def test_read_only_flag_recorded_in_call_metadata(read_only_meta):
    """Captured calls carry their tool's ``read_only`` metadata: ``verify_occurrences``
    reads it, so a repeated lookup is made once without any configuration."""
    runs = [_lookup_run(n, read_only_meta=read_only_meta) for n in range(9)]
    seq = ["find_customer", "get_order", "refund"]
    report = verify_occurrences(seq, find_occurrences(runs, seq))
    assert report.held_out == 3
    # Held out: runs 2, 5 and 8; run 5 looked up a mistyped order first.
    expected = 3 if read_only_meta else 2
    assert sum(o.reproduced for o in report.outcomes) == expected
    assert report.repeats_not_made == (1 if read_only_meta else 0)


def test_read_only_flow_must_make_every_repeat(tau_runs):
    """task34, trial 2: four reservation lookups, then ``think``: no side effect follows the
    lookups, so what they found is what the flow returns; one lookup is not the run."""
    seq = ("get_user_details", "get_reservation_details", "think")
    train = [o for _, o in find_occurrences(tau_runs[0] + tau_runs[1], seq)]
    flow = propose(seq, train, observed=len(train), side_effects=READ_ONLY).flow
    ((label, occ),) = [
        (lab, o) for lab, o in find_occurrences(tau_runs[2], seq) if "/task34/" in lab
    ]
    effects = {**READ_ONLY, "think": False}
    outcome = replay_occurrence(flow, occ, label=label, side_effects=effects)
    assert not outcome.reproduced and outcome.repeats_not_made == 0
    assert [d.tool for d in outcome.divergences] == ["get_reservation_details"] * 3
