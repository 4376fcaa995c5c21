"""Procedural memory finds a flow by the words its job was asked in when its index finds none
(:mod:`soloflow_core.memory.by_evidence`), on the trained worlds' real stores (SQLite and
PostgreSQL) and a real ``create_agent`` agent: the job's own wording with a new value is
found and routed; what later runs teach reaches retrieval; near misses still run nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import BANK, SHOP, Desk, approve, world

from soloflow_core.memory import ProceduralMemory
from soloflow_core.memory import by_evidence as by_evidence_module
from soloflow_core.store import Store

Trained = Callable[[str], Store]

SENT = "How much have I sent to AT893847169548451153?"
"""A training request of the bank's payments job (`How much have I sent to DE08…?`) with a
new IBAN: its flow's index holds `payments`, `get`, `iban`, none of its words."""


def _flow_ending(store: Store, ns: dict[str, str], tool: str) -> str:
    return next(m.name for m in store.list_flow_meta(**ns) if m.skill_keys[-1] == tool)


def test_the_jobs_own_wording_finds_its_flow_and_routes(trained_store: Trained) -> None:
    store = trained_store(BANK)
    w = world(BANK)
    approve(store, w)
    memory = ProceduralMemory(store)
    payments = _flow_ending(store, w.ns, "get_payments_to")
    assert memory.find_workflow(w.user, w.agent, SENT, by_evidence=False) == []
    found = memory.find_workflow(w.user, w.agent, SENT)
    assert [m.name for m in found] == [payments]
    assert found[0].matched_keywords == () and {"how", "send"} <= set(found[0].matched_terms)
    assert "the job's requests hold" in found[0].why
    w.module.EFFECTS.clear()
    with Desk(store, w) as desk:
        decision = desk.mw.route(SENT)
        assert decision.run == payments
        assert decision.inputs["recipient"] == "AT893847169548451153"
        got = desk.ask(SENT)
        assert got["calls"] == 0 and got["flow"] == payments
        # found the same way, declined by the gate as before: two IBANs, the direction
        # turned, a time of its own
        for text in (
            "How much have I sent to AT893847169548451153 and GB29NWBK60161331926819?",
            "How much has AT893847169548451153 sent to me?",
            "How much have I sent to AT893847169548451153 in March?",
        ):
            assert desk.mw.route(text).run is None, text


def test_what_later_runs_teach_reaches_retrieval(trained_store: Trained) -> None:
    store = trained_store(SHOP)
    w = world(SHOP)
    approve(store, w)
    memory = ProceduralMemory(store)
    text = "Where's my package? lucy.h@outlook.com"
    assert memory.find_workflow(w.user, w.agent, text) == []
    status = _flow_ending(store, w.ns, "notify_customer")
    store.add_flow_evidence(
        status,
        [(f"run-{i}", f"Where's my package? u{i}@example.com") for i in range(3)],
        source="agent_run",
        **w.ns,
    )
    assert [m.name for m in memory.find_workflow(w.user, w.agent, text)] == [status]
    # the agent's tools must include the flow's; one known word is no match
    assert memory.find_workflow(w.user, w.agent, text, available_tools=["find_customer"]) == []
    with_missing = memory.find_workflow(
        w.user, w.agent, text, available_tools=["find_customer"], include_unavailable=True
    )
    assert with_missing[0].missing_tools
    assert memory.find_workflow(w.user, w.agent, "package lucy.h@outlook.com") == []


def test_long_contexts_and_large_namespaces_use_the_index_alone(
    trained_store: Trained, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = trained_store(BANK)
    w = world(BANK)
    approve(store, w)
    memory = ProceduralMemory(store)
    assert memory.find_workflow(w.user, w.agent, SENT + " " + "x" * 5000) == []
    monkeypatch.setattr(by_evidence_module, "MAX_FLOWS", 2)
    assert memory.find_workflow(w.user, w.agent, SENT) == []
