"""Held-out real requests through the gate: flows learned from τ-bench trials 0–1 and all
approved by a careless user, with ``auto_execute`` on, run for none of trial 2's requests.

Real τ-bench GPT-4o airline runs (tests/data). Each held-out run gives two requests: the
user-simulator's instruction (the whole of what the customer wants, conditions and all) and
the customer's first message to the agent. The agent did different things for them (cancelled
or not, changed flights, refused, escalated); a flow that ran with no model call would do
its one job whatever the request said. The gate is the middleware's own: the flows the agent
could run (:class:`~soloflow_langgraph.routing.hints.OfferedFlows`, as
:class:`~soloflow_langgraph.routing.middleware.SoloFlowMiddleware` builds it) and
:func:`~soloflow_core.memory.router.decide_route`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import approve_candidate
from soloflow_core.learning.service import LearningService
from soloflow_core.ledger import parse_record
from soloflow_core.memory.router import decide_route
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig
from soloflow_core.store import Store
from soloflow_langgraph.routing.hints import OfferedFlows

DATA = Path(__file__).parent / "data"
TAU = DATA / "tau_bench_gpt-4o_airline_trials0-2.jsonl.gz"
DOJO = DATA / "agentdojo_ground_truth_v1.2.2.jsonl.gz"
NS = {"user_id": "u", "agent_id": "gpt-4o"}  # the records name their agent
CONFIG = LearningConfig(auto_execute=True, min_steps_to_learn=2)


def _records(path: Path = TAU) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def _gate(store: Store, records: list[dict[str, Any]]) -> tuple[OfferedFlows, LearningService]:
    """The flows the agent could run (every tool of the records available) and the learning
    service whose records the gate weighs."""
    tools = sorted({c["name"] for r in records for c in r["tool_calls"]})
    flows = OfferedFlows(
        store,
        tools=tools,
        runtime=None,
        pm=None,
        min_confidence=0.0,
        limit=5,
        learning_config=CONFIG,
        **NS,
    )
    return flows, LearningService(store, config=CONFIG)


def _route(store: Store, gate: tuple[OfferedFlows, LearningService], text: str) -> Any:
    """The gate's decision for ``text``, or None when no flow matches it."""
    flows, learning = gate
    matches = flows.find(text)
    if not matches:
        return None
    return decide_route(
        store,
        text,
        matches,
        config=CONFIG,
        definition=flows.definition,
        stats=lambda name: learning.stats(NS["user_id"], NS["agent_id"], name),
        **NS,
    )


@pytest.mark.parametrize("include_failed", [False, True], ids=["default", "include-failed"])
def test_flows_learned_from_real_runs_run_for_no_held_out_request(
    store: Store, include_failed: bool
) -> None:
    records = _records()
    store.add_runs(
        [
            parse_record(r, default_user="u", default_agent="gpt-4o")
            for r in records
            if r["meta"]["trial"] in (0, 1)
        ]
    )
    candidates = detect_candidates(
        store, config=DetectorConfig(include_failed_runs=include_failed), **NS
    )
    assert len(candidates) >= 2  # something to route to: the test is not vacuous
    for c in candidates:  # a careless user approves everything proposed
        approve_candidate(store, c.id, config=CONFIG, **NS)
    gate = _gate(store, records)
    consulted, ran = 0, []
    for r in records:
        if r["meta"]["trial"] != 2:
            continue
        for text in (r["task"], r["meta"]["first_user_message"]):
            decision = _route(store, gate, text)
            consulted += decision is not None
            if decision is not None and decision.run is not None:
                ran.append((r["meta"]["task_id"], decision.run, decision.inputs, text[:120]))
    assert consulted >= 50, consulted  # most requests reach the gate with a flow to weigh
    assert ran == []


def test_flows_learned_from_agentdojo_tasks_run_for_none_of_them(store: Store) -> None:
    """AgentDojo's reference solutions (four suites, each task once): sequences two tasks
    share (send money after reading the transactions, create an event after reading the
    day...) become flows, all approved; no task, learned from or held out, runs one."""
    records = _records(DOJO)
    held_out = records[1::2]
    store.add_runs(
        [  # into the test's namespace (the records name theirs "ground_truth")
            parse_record({**r, "agent_id": None}, default_user="u", default_agent="gpt-4o")
            for r in records[0::2]
        ]
    )
    detector = DetectorConfig(min_sequence_length=2, min_occurrences=2, max_candidates=20)
    candidates = detect_candidates(store, config=detector, **NS)
    assert len(candidates) >= 5
    for c in candidates:
        approve_candidate(store, c.id, config=CONFIG, **NS)
    gate = _gate(store, records)
    decisions = [(r, _route(store, gate, r["task"])) for r in records]
    consulted = [(r, d) for r, d in decisions if d is not None]
    assert len(consulted) >= 70, len(consulted)
    ran = [(r["meta"]["task_id"], r in held_out, d.run) for r, d in consulted if d.run is not None]
    assert ran == []
