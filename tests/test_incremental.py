"""Incremental detection after each run."""

from __future__ import annotations

import random

from soloflow_core.mining.closed import mine_closed_patterns
from soloflow_core.mining.incremental import IncrementalDetector, unit_names
from soloflow_core.models import dedupe_key_for


def test_reports_a_sequence_when_it_reaches_min_occurrences():
    det = IncrementalDetector()
    assert det.add_run("u", "a", ["a", "b", "c", "d"]) == []
    assert det.add_run("u", "a", ["x", "a", "b", "c", "d"]) == []
    assert det.add_run("u", "a", ["a", "b", "c", "d", "y"]) == [("a", "b", "c", "d")]
    det.mark_known("u", "a", [dedupe_key_for(("a", "b", "c", "d"))])
    assert det.add_run("u", "a", ["a", "b", "c", "d"]) == []
    # Namespaces are separate.
    assert det.add_run("v", "a", ["a", "b", "c", "d"]) == []


def test_loops_and_retries_count_as_one_step():
    det = IncrementalDetector()
    assert det.add_run("u", "a", ["a", "b", "c"]) == []
    assert det.add_run("u", "a", ["a", "b", "b", "b", "b", "c"]) == []  # one b per item
    assert det.add_run("u", "a", ["a", "a", "b", "c"]) == [("a", "b", "c")]  # a retried


def test_warm_start_and_agreement_with_the_full_miner():
    rng = random.Random(7)
    runs = [[rng.choice("abcde") for _ in range(rng.randint(0, 8))] for _ in range(60)]
    det = IncrementalDetector(max_length=8)
    det.warm("u", "a", runs[:-1])
    reported = det.add_run("u", "a", runs[-1])
    units = [unit_names(r) for r in runs]  # what both detectors count
    closed = {p.names for p in mine_closed_patterns(units)}
    last = units[-1]
    frequent_in_last = {
        g for g in closed if any(last[i : i + len(g)] == g for i in range(len(last)))
    }
    # Every closed pattern the new run contains is reported, or lies inside a reported one.
    for g in frequent_in_last:
        assert any(any(r[i : i + len(g)] == g for i in range(len(r))) for r in reported), g


def test_memory_is_bounded():
    det = IncrementalDetector(max_entries=1000)
    for i in range(500):
        det.add_run("u", "a", [f"t{i}-{j}" for j in range(10)])
    assert len(det._states[("u", "a")].support) <= 1000 + 8 * 10


def test_handler_proposes_candidates_as_runs_arrive(sqlite_store):
    from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
    from soloflow_langgraph.demo.agent import build_support_agent

    agent, _ = build_support_agent()
    handler = SoloFlowCallbackHandler(store=sqlite_store, user_id="u", agent_id="bot", detect=True)
    emails = ["alice@example.com", "bob@example.org", "carol@example.net", "dave@example.com"]
    for i, email in enumerate(emails):
        agent.invoke(
            {"messages": [{"role": "user", "content": f"where is my order? {email}"}]},
            config={"callbacks": [handler]},
        )
        handler.watcher.wait(30)
        if i < 2:
            assert handler.watcher.proposed == []
    (cand,) = handler.watcher.proposed
    assert cand.tool_sequence == [
        "find_customer",
        "list_orders",
        "track_shipment",
        "notify_customer",
    ]
    assert cand.occurrence_count == 3  # proposed right after the third run, once
    assert sqlite_store.get_candidate(cand.id, user_id="u", agent_id="bot").status == "pending"


def test_failed_runs_do_not_trigger_detection(sqlite_store):
    from soloflow_core.mining.watch import DetectionWatcher
    from soloflow_core.models import TaskRun, ToolCall

    def run(rid: str, success: bool) -> TaskRun:
        return TaskRun(run_id=rid, success=success, tool_calls=[ToolCall(name=n) for n in "abc"])

    watcher = DetectionWatcher(sqlite_store, background=False)
    first = run("ok0", True)
    sqlite_store.add_runs([first])
    watcher.observe(first)  # warms the namespace up
    for i in range(3):
        failed = run(f"failed{i}", False)
        sqlite_store.add_runs([failed])
        assert watcher.observe(failed) is False
    assert watcher.proposed == []
    for i in (1, 2):
        ok = run(f"ok{i}", True)
        sqlite_store.add_runs([ok])
        started = watcher.observe(ok)
    assert started and [c.tool_sequence for c in watcher.proposed] == [["a", "b", "c"]]
