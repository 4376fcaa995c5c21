"""The detector on the real tau-bench runs, on a planted synthetic ledger and on small
ledgers with known answers."""

from __future__ import annotations

import pytest
from conftest import TAU_BENCH

from soloflow_core.learning.promotion import approve_candidate, reject_candidate
from soloflow_core.ledger import ingest
from soloflow_core.mining.closed import mine_closed_patterns
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.mining.options import DEFAULT_TOKENS_PER_STEP
from soloflow_core.models import DetectorConfig, ModelCall, TaskRun, ToolCall
from soloflow_core.testing.synthetic_ledger import generate_ledger, score_top_k

NS = {"user_id": "default", "agent_id": "default"}


@pytest.fixture
def tau_store(sqlite_store):
    ingest(sqlite_store, [TAU_BENCH], default_user="default", default_agent="default")
    return sqlite_store


@pytest.fixture
def tau_both(store):
    """The τ-bench runs on SQLite and on PostgreSQL."""
    ingest(store, [TAU_BENCH], default_user="default", default_agent="default")
    return store


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
    # 87 of the 150 runs failed (reward 0): counted only on request.
    config = DetectorConfig(max_candidates=5, include_failed_runs=True)
    cands = detect_candidates(tau_store, config=config, **NS)
    assert len(cands) == 5
    grd = "get_reservation_details"
    # Loops are one step: get_reservation_details once per reservation of the user.
    (cancel,) = [
        c for c in cands[:2] if c.tool_sequence == ["get_user_details", grd, "cancel_reservation"]
    ]
    assert 1 in cancel.repeated_steps and cancel.occurrence_count >= 15
    top = cands[0]
    assert top.savings_method.startswith("estimate")  # the file records no token usage
    for c in cands:
        assert c.occurrence_count >= 3 and len(c.run_ids) == c.occurrence_count
        assert c.dedupe_key == "flow_offload:" + "→".join(c.tool_sequence)
        assert c.score_bits is not None and c.explanation
        flow = c.proposed_flow
        assert flow.name == "Auto: " + " → ".join(c.tool_sequence)
        assert flow.tags == ["auto-generated", "flow-offload"]
        assert [s.skill_key for s in flow.steps] == c.tool_sequence
        assert flow.steps[0].depends_on == [] and flow.steps[1].depends_on == ["step_1"]
        assert all(
            s.retry_max == 2 and s.timeout_seconds == 120 and s.on_failure == "stop"
            for s in flow.steps
        )
    stored = tau_store.list_candidates(**NS)
    assert {c.id for c in stored} == {c.id for c in cands}
    again = detect_candidates(tau_store, config=config, **NS)
    assert [c.id for c in again] == [c.id for c in cands]  # stable ids


def test_failed_runs_do_not_count_by_default(tau_store):
    config = DetectorConfig(max_candidates=5)
    seqs = {
        tuple(c.tool_sequence)
        for c in detect_candidates(tau_store, config=config, save=False, **NS)
    }
    failed = {r.run_id for r in tau_store.iter_sequences(**NS) if r.success is False}
    for c in detect_candidates(tau_store, config=config, save=False, **NS):
        assert not failed & set(c.run_ids)
    with_failed = detect_candidates(
        tau_store, config=config.model_copy(update={"include_failed_runs": True}), save=False, **NS
    )
    assert seqs != {tuple(c.tool_sequence) for c in with_failed}


# The τ-bench reading (benchmarks/RESULTS.md, "τ-bench reading"): a workflow a person would
# name does a job, so it ends in one of the airline's actions; one that ends in a lookup, a
# search or a sum is a fragment of one.
TAU_JOBS = {
    "book_reservation": "book",
    "cancel_reservation": "cancel",
    "update_reservation_flights": "change flights",
    "update_reservation_baggages": "change baggage",
    "update_reservation_passengers": "change passengers",
    "transfer_to_human_agents": "escalate to a person",
    "send_certificate": "compensate with a certificate",
}


def test_tau_bench_top_ten_are_named_workflows(tau_both):
    config = DetectorConfig(max_candidates=10, include_failed_runs=True)
    cands = detect_candidates(tau_both, config=config, save=False, **NS)
    assert len(cands) == 10
    named = [TAU_JOBS.get(c.tool_sequence[-1]) for c in cands]
    assert sum(n is not None for n in named) >= 7, named
    assert {"book", "cancel", "change flights", "escalate to a person"} <= set(named)
    for c in cands:
        # think (free text in, nothing out) is never a step; the user id is read from the
        # task by its shape whatever the words before it.
        assert "think" not in c.tool_sequence
        if c.tool_sequence[0] == "get_user_details":
            assert c.proposed_flow.steps[0].input_map == {"user_id": "{{_trigger.user_id}}"}
            assert "user_id" in c.proposed_flow.extraction


def test_tau_bench_default_view_hard_codes_no_task_value(tau_both):
    """Successful runs only: every constant a flow keeps is used by runs of two tasks or
    more (replays of one task are one piece of evidence)."""
    cands = detect_candidates(tau_both, config=DetectorConfig(max_candidates=10), save=False, **NS)
    assert cands
    runs = {r.run_id: r for r in tau_both.load_runs([i for c in cands for i in c.run_ids], **NS)}
    for c in cands:
        tasks = {runs[i].task for i in c.run_ids}
        assert len(tasks) >= 2, c.tool_sequence
        for step in c.proposed_flow.steps:
            for key, value in step.input_map.items():
                if isinstance(value, str) and "{{" in value:
                    continue
                used_in = {
                    runs[i].task
                    for i in c.run_ids
                    for call in runs[i].tool_calls
                    if call.name == step.skill_key and (call.args or {}).get(key) == value
                }
                assert len(used_in) >= 2, (c.tool_sequence, step.id, key, value)


def _run(i: int, names: list[str], cost: float | None = None, task: str = "") -> TaskRun:
    return TaskRun(
        run_id=f"r{i}", task=task, cost=cost, tool_calls=[ToolCall(name=n) for n in names]
    )


def test_savings_and_cost_fields(sqlite_store):
    runs = [_run(i, ["a", "b", "c"], cost=c) for i, c in enumerate([8.0, 10.0, 12.0])]
    runs.append(_run(9, ["x", "a", "b", "c", "y"], cost=None))
    sqlite_store.add_runs(runs)
    (cand,) = detect_candidates(sqlite_store, **NS)
    assert cand.tool_sequence == ["a", "b", "c"] and cand.occurrence_count == 4
    assert cand.avg_cost_per_execution == pytest.approx(10.0)  # runs with a known cost
    # No token usage recorded: the documented per-step estimate, 2 turns saved of 3.
    assert cand.tokens_saved_per_occurrence == pytest.approx(2 * DEFAULT_TOKENS_PER_STEP)
    assert cand.estimated_token_savings == pytest.approx(4 * 2 * DEFAULT_TOKENS_PER_STEP)
    assert cand.savings_method.startswith("estimate")
    assert cand.match_type == "exact"


def test_savings_are_measured_from_usage_metadata(sqlite_store):
    runs = []
    for i in range(3):
        calls = [ToolCall(name=n) for n in ("a", "b", "c")]
        turns = [
            ModelCall(input_tokens=900, output_tokens=100, tool_calls_requested=1) for _ in calls
        ]
        turns.append(ModelCall(input_tokens=1200, output_tokens=50))
        runs.append(TaskRun(run_id=f"m{i}", tool_calls=calls, model_calls=turns))
    sqlite_store.add_runs(runs)
    (cand,) = detect_candidates(sqlite_store, **NS)
    # Three turns of 1000 tokens requested the calls; the flow call keeps one of them.
    assert cand.tokens_saved_per_occurrence == pytest.approx(2000)
    assert cand.turns_saved_per_occurrence == pytest.approx(2)
    assert cand.savings_method.startswith("measured")


def test_retries_loops_strays_and_swaps(sqlite_store):
    ok, err = False, True
    runs = [
        TaskRun(
            run_id="r0",
            tool_calls=[
                ToolCall(name=n, error=e)
                for n, e in [("a", ok), ("b", err), ("b", ok), ("c", ok), ("d", ok)]
            ],
        ),
        TaskRun(run_id="r1", tool_calls=[ToolCall(name=n) for n in ["a", "b", "noise", "c", "d"]]),
        TaskRun(run_id="r2", tool_calls=[ToolCall(name=n) for n in ["a", "c", "b", "d"]]),
        TaskRun(run_id="r3", tool_calls=[ToolCall(name=n) for n in ["a", "b", "b", "b", "c", "d"]]),
        _run(4, ["a", "b", "c", "d"]),
    ]
    sqlite_store.add_runs(runs)
    # r0 (a retry) and r3 (a loop) are clean occurrences; r1 (a stray call) and r2 (a
    # swapped pair) are credited to the same pattern, not left to fragments.
    (cand, *_) = detect_candidates(sqlite_store, **NS)
    assert cand.tool_sequence == ["a", "b", "c", "d"] and cand.occurrence_count == 5
    assert cand.clean_occurrences == 3 and cand.repeated_steps == [1]
    assert set(cand.run_ids) == {"r0", "r1", "r2", "r3", "r4"}
    strict = detect_candidates(
        sqlite_store, config=DetectorConfig(tolerate_noise=False), save=False, **NS
    )
    assert [(c.tool_sequence, c.occurrence_count) for c in strict][0] == (["a", "b", "c", "d"], 3)


def test_a_swap_that_passes_data_is_not_noise(sqlite_store):
    def run(i: int, order: str) -> TaskRun:
        calls = {
            "a": ToolCall(name="a", args={"q": f"task-{i}"}, output={"ref": f"REF-{i}"}),
            "b": ToolCall(name="b", args={"ref": f"REF-{i}"}, output={"x": f"X-{i}"}),
            "c": ToolCall(name="c", args={"mode": "strict"}, output="ok"),
        }
        return TaskRun(run_id=f"s{order}{i}", tool_calls=[calls[k] for k in order])

    # b reads a's output: "b a c" is not "a b c" with a swap, however often it is seen.
    sqlite_store.add_runs([run(i, "abc") for i in range(3)] + [run(i, "bac") for i in range(3)])
    cands = {tuple(c.tool_sequence): c for c in detect_candidates(sqlite_store, save=False, **NS)}
    assert cands[("a", "b", "c")].occurrence_count == 3


def test_mining_across_namespaces_is_an_explicit_opt_in(sqlite_store):
    sqlite_store.add_runs([_run(i, ["a", "b", "c"]) for i in range(2)])
    other = [
        _run(10 + i, ["a", "b", "c"]).model_copy(update={"agent_id": "bot2"}) for i in range(2)
    ]
    sqlite_store.add_runs(other)
    assert detect_candidates(sqlite_store, **NS) == []
    (cand,) = detect_candidates(sqlite_store, also_namespaces=[("default", "bot2")], **NS)
    assert cand.occurrence_count == 4 and cand.user_id == "default" and cand.agent_id == "default"
    assert set(cand.run_ids) == {"r0", "r1", "r10", "r11"}
    assert sqlite_store.list_candidates(user_id="default", agent_id="bot2") == []


def test_planted_workflows_come_first(sqlite_store):
    ledger = generate_ledger(runs=5000, workflows=20, seed=11, noise=0.1)
    sqlite_store.add_runs(list(ledger.runs))
    cands = detect_candidates(
        sqlite_store, config=DetectorConfig(max_candidates=20), save=False, **NS
    )
    precision, recall = score_top_k([c.tool_sequence for c in cands], ledger.workflows, k=20)
    assert precision >= 0.9 and recall >= 0.9
    assert all(c.savings_method.startswith("measured") for c in cands)


def test_subsequence_match_and_lookback(sqlite_store):
    sqlite_store.add_runs([_run(i, ["s", "a", "b", "c", f"t{i}"]) for i in range(3)])
    (cand,) = detect_candidates(sqlite_store, **NS)
    assert cand.tool_sequence == ["s", "a", "b", "c"] and cand.match_type == "subsequence"
    sqlite_store.add_runs([_run(10 + i, ["q", "r", "s"]) for i in range(3)])
    recent = detect_candidates(
        sqlite_store, config=DetectorConfig(lookback_limit=3), save=False, **NS
    )
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
        runs.append(
            TaskRun(
                run_id=f"w{i}",
                task=f"status for {email} please",
                tool_calls=[
                    ToolCall(name="find", args={"email": email}, output=f'{{"id": "{cid}"}}'),
                    ToolCall(
                        name="orders",
                        args={"customer_id": cid, "limit": 5},
                        output=f'[{{"order": "{cid}-o"}}]',
                    ),
                    ToolCall(name="track", args={"order": f"{cid}-o"}, output="ok"),
                ],
            )
        )
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
    from soloflow_core.learning.promotion import submit_flow
    from soloflow_core.models import FlowDefinition, FlowStep

    sqlite_store.add_runs([_run(i, ["a", "b", "c"]) for i in range(3)])
    flow = FlowDefinition(
        name="mine", steps=[FlowStep(id=f"s{i}", skill_key=k) for i, k in enumerate("xabcy")]
    )
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


def test_read_only_tools_from_configuration_run_in_parallel(sqlite_store):
    runs = [
        TaskRun(
            run_id=f"p{i}",
            task=f"look up A{i} and B{i}",
            tool_calls=[
                ToolCall(name="get_a", args={"id": f"A{i}"}, output={"a": i}),
                ToolCall(name="get_b", args={"id": f"B{i}"}, output={"b": i}),
                ToolCall(name="report", args={"text": f"A{i} B{i}"}, output="ok"),
            ],
        )
        for i in range(3)
    ]
    sqlite_store.add_runs(runs)
    (kept,) = detect_candidates(sqlite_store, save=False, **NS)
    assert [s.depends_on for s in kept.proposed_flow.steps][:2] == [
        [],
        ["step_1"],
    ]  # observed order
    config = DetectorConfig(side_effects={"get_a": False, "get_b": False})
    (parallel,) = detect_candidates(sqlite_store, config=config, save=False, **NS)
    assert [s.depends_on for s in parallel.proposed_flow.steps][:2] == [[], []]


def test_evidence_is_read_once_for_all_candidates_and_sampled(sqlite_store, monkeypatch):
    from soloflow_core.mining.detector import INERT_SAMPLE_RUNS, MAX_EVIDENCE_RUNS

    many = MAX_EVIDENCE_RUNS + 50  # more occurrences than are read per candidate
    runs = [_run(i, ["a", "b", "c"]) for i in range(many)]
    runs += [_run(10_000 + i, ["x", "y", "z", "w"]) for i in range(5)]
    sqlite_store.add_runs(runs)
    cols = sqlite_store.read_tool_names(**NS)
    run_id_of = dict(zip(cols.run_pks.tolist(), cols.run_ids, strict=True))
    reads: list[list[str]] = []
    read_evidence = sqlite_store.read_evidence

    def counting(pks, **ns):
        reads.append([run_id_of[pk] for pk in pks])
        return read_evidence(pks, **ns)

    monkeypatch.setattr(sqlite_store, "read_evidence", counting)
    cands = {tuple(c.tool_sequence): c for c in detect_candidates(sqlite_store, save=False, **NS)}
    assert cands[("a", "b", "c")].occurrence_count == many  # support: the whole ledger
    assert cands[("x", "y", "z", "w")].occurrence_count == 5
    # One read of a sample spread over the ledger (for the note-taking tools, see
    # soloflow_core.mining.replays), then one read for both candidates.
    sample, read = reads
    assert len(sample) == INERT_SAMPLE_RUNS
    assert len(read) == len(set(read)) == MAX_EVIDENCE_RUNS + 5
    sampled = sorted(int(r[1:]) for r in read if int(r[1:]) < many)
    assert sampled[0] == 0 and sampled[-1] >= many - 2  # spread over the whole history


# ---------------------------------------------------------------------- the detector's reads


def _evidence_runs() -> list[TaskRun]:
    """Runs with every kind of value a call's JSON columns hold, and model usage."""
    values = [
        None,
        {},
        [],
        "",
        "text",
        '{"json": "text"}',
        0,
        1.5,
        True,
        {"a": [1, {"b": None}]},
        "é \u2028 \x1f",
        [{"id": "x"}, {"id": "y"}],
    ]
    runs = []
    for i, v in enumerate(values):
        calls = [
            ToolCall(
                name="find",
                args={"q": v, "n": i},
                output=v,
                error=None if i % 3 else True,
                meta={"side_effects": False} if i % 2 else {},
            ),
            ToolCall(
                name="act",
                args={} if i % 4 else {"v": v},
                output=None,
                error=bool(i % 2),
                duration_ms=1.0,
                tool_call_id=f"c{i}",
            ),
        ]
        turns = (
            [
                ModelCall(
                    input_tokens=10 * i,
                    output_tokens=i,
                    total_tokens=11 * i,
                    tool_calls_requested=2,
                )
            ]
            if i % 5
            else []
        )
        runs.append(
            TaskRun(
                run_id=f"e{i}",
                task=None if i == 3 else f"task {i}",
                tool_calls=calls,
                model_calls=turns,
            )
        )
    runs.append(TaskRun(run_id="empty", task="nothing"))
    return runs


def test_read_evidence_gives_the_runs_as_written(store):
    """The detector's lean read of a run has the fields of the full model that it reads,
    with the values written (numbers stored as numbers too), on SQLite and PostgreSQL."""
    runs = _evidence_runs()
    store.add_runs(runs)
    store.add_runs(
        [
            TaskRun(
                run_id="e0", user_id="mallory", task="theirs", tool_calls=[ToolCall(name="steal")]
            )
        ]
    )
    cols = store.read_tool_names(**NS)
    pks = cols.run_pks.tolist()
    theirs = store.read_tool_names(user_id="mallory", agent_id="default").run_pks.tolist()
    got = store.read_evidence(pks + theirs, **NS)
    assert sorted(got) == sorted(pks)  # another namespace's run is left out
    written = {r.run_id: r for r in runs}
    for pk, run_id in zip(pks, cols.run_ids, strict=True):
        lean, want = got[pk], written[run_id]
        assert lean.task == want.task
        assert [(c.name, c.args, c.output, c.error, c.meta) for c in lean.tool_calls] == [
            (c.name, c.args, c.output, c.error, c.meta) for c in want.tool_calls
        ]
        assert [repr(c.output) for c in lean.tool_calls] == [
            repr(c.output) for c in want.tool_calls
        ]
        assert [
            (m.input_tokens, m.output_tokens, m.total_tokens, m.tool_calls_requested)
            for m in lean.model_calls
        ] == [
            (m.input_tokens, m.output_tokens, m.total_tokens, m.tool_calls_requested)
            for m in want.model_calls
        ]
    assert store.read_evidence([], **NS) == {}


def test_read_evidence_never_shifts_values_between_calls():
    """JSON texts are decoded in one parse; text that is not one JSON value each (written
    by hand) cannot shift values between calls: it fails as decoding it alone does."""
    import json

    from soloflow_core.store.columns import _json_array

    texts = ['{"a": 1}', None, "[1]", '"x"', "null", 1.5, 7]
    assert _json_array(texts) == [{"a": 1}, None, [1], "x", None, 1.5, 7]
    with pytest.raises(json.JSONDecodeError):  # joined, "1, 2" and "3" parse as 3 values
        _json_array(["1, 2", "3"])


def test_read_tool_names_numbers_names_in_order_however_each_chunk_is_read(
    sqlite_store, monkeypatch
):
    """Chunks are decoded in a worker while the next one is read, each with its own
    vocabulary; a chunk the quick read cannot vouch for is read row by row. Codes still
    number the names in order of first appearance over the whole ledger."""
    import numpy as np

    from soloflow_core.store import columns

    runs = [_run(i, [f"t{(i * 7 + k) % 23}" for k in range(i % 5)]) for i in range(60)]
    sqlite_store.add_runs(runs)
    want = [(s.run_id, s.names, s.errors) for s in sqlite_store.iter_sequences(**NS)]
    monkeypatch.setattr(columns, "_CALLS_PER_READ", 7)
    quick = sqlite_store.read_tool_names(**NS)
    decode = columns._decode_chunk
    seen: list[int] = []

    def every_other(text, offsets, lo, hi):  # chunks 1, 3, 5, ... fall back
        seen.append(lo)
        return None if len(seen) % 2 == 0 else decode(text, offsets, lo, hi=hi)

    monkeypatch.setattr(columns, "_decode_chunk", every_other)
    mixed = sqlite_store.read_tool_names(**NS)
    assert len(seen) > 4
    for cols in (quick, mixed):
        got = [
            (
                cols.run_ids[r],
                tuple(cols.names[c] for c in cols.codes[cols.offsets[r] : cols.offsets[r + 1]]),
                tuple(bool(e) for e in cols.errors[cols.offsets[r] : cols.offsets[r + 1]]),
            )
            for r in range(cols.run_count)
        ]
        assert got == want
        assert cols.names == list(dict.fromkeys(n for _, names, _ in want for n in names))
    np.testing.assert_array_equal(quick.codes, mixed.codes)


def test_read_tool_names_of_an_in_memory_database_stays_on_its_connection():
    """Chunks of a SQLite file are read on connections of their own; an in-memory
    database exists only on its one connection, so it is read there."""
    from soloflow_core.store import Store, columns

    with Store.open("sqlite://") as store:
        store.add_runs([_run(i, ["a", "b", "c"][: 1 + i % 3]) for i in range(20)])
        with store.engine.connect() as conn:
            assert not columns._file_backed(conn)
        cols = store.read_tool_names(**NS)
        assert [
            tuple(cols.names[c] for c in cols.codes[cols.offsets[r] : cols.offsets[r + 1]])
            for r in range(cols.run_count)
        ] == [s.names for s in store.iter_sequences(**NS)]


def test_columns_the_caller_read_are_mined_as_the_detector_reads_them(sqlite_store):
    runs = [_run(i, ["a", "b", "c"] if i % 2 else ["x", "a", "b", "c", "y"]) for i in range(8)]
    sqlite_store.add_runs(runs)
    config = DetectorConfig(lookback_limit=6)
    cols = sqlite_store.read_tool_names(**NS, lookback=6)
    given = detect_candidates(sqlite_store, config=config, save=False, columns=cols, **NS)
    read = detect_candidates(sqlite_store, config=config, save=False, **NS)
    assert [c.model_dump(exclude={"created_at"}) for c in given] == [
        c.model_dump(exclude={"created_at"}) for c in read
    ]
    assert given and given[0].occurrence_count == 6
