"""Verification on the runs a flow was mined from, noise and all.

Two things kept flows mined from noisy runs from ever being verified (so never promoted):

* the miner tolerates one stray call between two steps, but verification looked for the
  steps back to back: 22 of 160 true workflows of `bench_seeds.py --settings noisy` (seeds
  100-139) had fewer than 3 such occurrences among 20-50 runs, and could not be verified;
* the held-out occurrences were every third one, less those replaying a training
  occurrence's task: where a few tasks repeat (a handful of cities), none was left.

Now one stray call is tolerated there too (the same calls for verify, promotion and
export: ``flow_occurrences``), and occurrences are split by task.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_seeds import SETTINGS
from soloflow_core.generalize.align import TOLERATED_GAP, find_occurrence
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.flow_calls import split_by_task
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig, ToolCall
from soloflow_core.testing.synthetic_ledger import generate_ledger
from soloflow_langgraph.verify import verify_candidate, verify_occurrences

NS = {"user_id": "default", "agent_id": "default"}
NOISY = SETTINGS["noisy"]  # three times generate_ledger's noise


def _calls(*names: str) -> list[ToolCall]:
    return [ToolCall(name=n, args={"k": i}, output={"i": i}) for i, n in enumerate(names)]


# ------------------------------------------------------------------ finding occurrences


def test_one_stray_call_between_steps_is_tolerated_only_when_asked():
    calls = _calls("a", "x", "b", "c")
    assert find_occurrence(calls, ["a", "b", "c"]) is None
    occ = find_occurrence(calls, ["a", "b", "c"], max_gap=TOLERATED_GAP)
    assert occ is not None
    assert occ.args == [{"k": 0}, {"k": 2}, {"k": 3}]  # the stray is no step's
    assert [len(s) for s in occ.step_calls] == [1, 1, 1]


def test_two_stray_calls_in_one_gap_are_not_the_flow():
    calls = _calls("a", "x", "y", "b", "c")
    assert find_occurrence(calls, ["a", "b", "c"], max_gap=1) is None


def test_a_contiguous_occurrence_is_preferred_to_an_earlier_one_with_a_stray():
    calls = _calls("a", "x", "b", "a", "b")
    occ = find_occurrence(calls, ["a", "b"], max_gap=1)
    assert occ is not None and occ.args == [{"k": 3}, {"k": 4}]


def test_errored_calls_are_dropped_before_gaps_are_counted():
    calls = [
        ToolCall(name="a", args={"k": 0}),
        ToolCall(name="b", args={"k": 1}, error=True),  # a failed try, retried
        ToolCall(name="b", args={"k": 2}),
    ]
    occ = find_occurrence(calls, ["a", "b"])
    assert occ is not None and occ.args == [{"k": 0}, {"k": 2}]


# ------------------------------------------------------------------ splitting by task


@given(st.lists(st.sampled_from(["t1", "t2", "t3", "t4", "t5", ""]), max_size=40))
def test_no_held_out_occurrence_replays_a_training_task(tasks):
    train, held, set_aside = split_by_task(tasks)
    assert not {tasks[k] for k in held if tasks[k]} & {tasks[k] for k in train}
    assert len({tasks[k] for k in held if tasks[k]}) == sum(1 for k in held if tasks[k])
    assert len(train) + len(held) + set_aside == len(tasks)
    assert not set(train) & set(held)


def test_with_two_tasks_the_last_is_held_out():
    assert split_by_task(["a", "a", "a", "b", "b"]) == ([0, 1, 2], [3], 1)
    assert split_by_task(list("abcdefgh"))[1] == [2, 4, 7]  # 8 tasks: 3 held out
    assert split_by_task(list("abcdef"))[1] == [2, 5]
    assert split_by_task(["a", "a"]) == ([0, 1], [], 0)  # one task: nothing to replay


def _occ(task: str, value: str) -> tuple[str, Occurrence]:
    return (
        task,
        Occurrence(task=task, args=[{"city": value}, {"id": "x"}], outputs=[{"id": "x"}, None]),
    )


def test_a_flow_learned_from_one_task_is_replayed_on_another():
    """Three trials of one task, three of another (the city is nowhere in the task text).
    By index, every held-out occurrence replayed a trained task: nothing was verified. By
    task, the flow learned from the first task alone is replayed on the second: the city it
    could not see vary is an input (given from the recording), not Denver hard-coded."""
    occs = [_occ("Refund the last payment of customer 7", "Denver")] * 3
    occs += [_occ("Refund the last payment of customer 9", "Perth")] * 3
    report = verify_occurrences(["lookup", "refund"], occs, side_effects={"refund": True})
    assert report.trained_on == 3 and report.held_out == 1
    assert report.flow is not None
    assert report.flow.steps[0].input_map == {"city": "{{_trigger.city}}"}
    (outcome,) = report.outcomes
    assert outcome.reproduced and outcome.inputs == {"city": "Perth"}
    assert outcome.inputs_from_recording == ["city"]
    assert any("replay the task of another held-out one" in n for n in report.notes)


def test_a_value_read_from_the_task_text_is_replayed_on_another_task():
    occs = [_occ(f"Please refund the payment: city {c}", c) for c in ["Denver"] * 3]
    occs += [_occ("Please refund the payment: city Perth", "Perth")]
    report = verify_occurrences(["lookup", "refund"], occs, side_effects={"refund": True})
    assert report.held_out == 1 and report.fidelity == 1.0


def test_occurrences_of_one_task_say_so_and_how_to_fix_it():
    occs = [_occ("Please refund: city Denver", "Denver")] * 4
    report = verify_occurrences(["lookup", "refund"], occs)
    assert report.fidelity is None
    assert "4 occurrence(s) are of 1 task(s)" in report.notes[0]


# ------------------------------------------------------------------ noisy ledgers, both stores


def test_every_workflow_mined_from_noisy_runs_is_verified(store):
    """Seed 109: one planted workflow had 29 runs and no contiguous occurrence; seed 104's
    city workflow had every held-out task among the trained ones."""
    for seed in (104, 109):
        led = generate_ledger(seed=seed, **NOISY)
        effects = {s.tool: not s.read_only for w in led.workflows for s in w.steps}
        ns = {"user_id": f"u{seed}", "agent_id": "default"}
        store.add_runs([r.model_copy(update={"user_id": ns["user_id"]}) for r in led.runs[:400]])
        config = DetectorConfig(max_candidates=4, side_effects=effects)
        cands = detect_candidates(store, config=config, save=True, **ns)
        assert len(cands) == 4
        for cand in cands:
            updated, report = verify_candidate(store, cand.id, save=True, **ns)
            assert report.fidelity == 1.0, (seed, cand.tool_sequence, report.notes)
            assert report.held_out >= 3, (seed, cand.tool_sequence, report.notes)
            assert updated.held_out == report.held_out
            stored = store.get_candidate(cand.id, **ns)
            assert stored.fidelity == 1.0 and stored.held_out == report.held_out
