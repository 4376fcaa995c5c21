"""Routing in a fourth world, written blind: the IT helpdesk of
``benchmarks/routing_world_helpdesk.py`` (probe7).

A real ``create_agent`` agent learns four jobs — unlock an account, order a replacement
laptop, add a person to a group, book a room — and a person approves the flows. Its blind
corpus and two probe rounds found 44 of 485 near misses running: ``lock`` (known from ``I'm
locked out``) ran the unlock flow, ``… and lock it`` too, and ``as admin`` ran the group flow
because ``admin`` was known from the group name ``sre-admins``. Every one of them now runs no
flow, cold and after a stream of new phrasings; the laptop flow's ``category="laptop"``,
named by every task, is the job's constant, so its new phrasings run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest
from routing_support import HELPDESK, Desk, approve, world

from benchmarks import routing_world_helpdesk as W
from soloflow_core.memory.forms import hyphen_parts, states_only
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store
from soloflow_langgraph.routing.tools import flow_tool_name

Trained = Callable[[str], Store]
HELP = world(HELPDESK)


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def _near_misses() -> list[str]:
    near = [r["text"] for r in W.load_corpus() if r["split"] == "test" and r["job"] is None]
    return near + [text for text, job in W.HOSTILE if job is None]


def _ran(desk: Desk, texts: list[str]) -> list[tuple[str, object]]:
    out = []
    for text in texts:
        got = desk.ask(text)
        if got["flow"] is not None or got["effects"] or got["calls"] == 0:
            out.append((text, got["flow"]))
    return out


def test_no_near_miss_runs_a_flow_cold_or_after_a_stream(trained_store: Trained):
    store = trained_store(HELPDESK)
    approve(store, HELP)
    near = _near_misses()
    assert len(near) >= 450
    with Desk(store, HELP) as desk:
        assert _ran(desk, near) == []
    # the new phrasings as a stream: the agent does what the gate declines (calling the
    # offered flow tool), and each request it served becomes evidence of its job
    stream = [r for r in W.load_corpus() if r["category"] == "paraphrase"]
    random.Random(1).shuffle(stream)
    with Desk(store, HELP) as desk:
        desk.model.flow_tool_for = {
            job: flow_tool_name(store.get_flow(m.name, **HELP.ns).flow)
            for m in store.list_flow_meta(**HELP.ns)
            for job, tool in W.EFFECT_TOOL.items()
            if m.skill_keys[-1] == tool
        }
        served = 0
        for r in stream:
            before = len(W.EFFECTS)
            got = desk.ask(r["text"])
            if got["calls"] == 0:  # a routed run: the right job with the request's values
                assert W.served(r, W.EFFECTS[before:]), (r["text"], got)
                served += 1
        assert served >= 20
    with Desk(store, HELP) as desk:
        assert _ran(desk, near) == []


def test_the_laptop_named_by_every_task_is_the_flows_constant(trained_sqlite: Trained):
    store = trained_sqlite(HELPDESK)
    approve(store, HELP)
    meta = next(m for m in store.list_flow_meta(**HELP.ns) if m.skill_keys[-1] == "create_order")
    flow = store.get_flow(meta.name, **HELP.ns).flow
    assert flow.input_schema["required"] == ["query"]
    assert (
        next(s for s in flow.steps if s.skill_key == "check_inventory").input_map["category"]
        == "laptop"
    )
    with Desk(store, HELP) as desk:
        got = desk.ask("Please order a replacement laptop for E-7960")
        assert (got["flow"], got["calls"]) == (meta.name, 0)
        assert W.right_effect("replace_laptop", {"employee_id": "E-7960"}, got["effects"])


@pytest.mark.parametrize(
    "text",
    [
        "Please lock the account for E-8551",
        "Please unlock the account for E-8551 and lock it",
        "Please lock the unlocked account for E-8551",
        "Unlock my account; lock E-8551",
    ],
)
def test_the_opposite_action_or_a_second_one_is_never_the_unlock_job(
    trained_sqlite: Trained, text: str
):
    store = trained_sqlite(HELPDESK)
    approve(store, HELP)
    with Desk(store, HELP) as desk:
        route = desk.mw.route(text)
        assert route.run is None, route
        assert any("another action: lock" in r for c in route.checks for r in c.reasons)
        got = desk.mw.route("I'm locked out. Employee id E-9999, please unlock me")
        assert got.run is not None, got  # a state is no action asked for


def test_a_word_known_only_inside_a_name_is_not_known_alone():
    job = JobEvidence.of(
        [
            "Add jonas@acme.example to the sre-admins group",
            "Please add ana@acme.example to finance-readers",
            "Add bo@acme.example to the vpn-users group please",
        ]
    )
    assert {"admin", "financ", "reader"} <= job.named_only
    alone = judge_intent(job, read_request("Please add cy@acme.example to sre-admins as admin"))
    assert alone.verdict != "run" and "admin" in alone.unknown
    named = judge_intent(job, read_request("Please add cy@acme.example to sre-admins"))
    assert "admin" not in named.unknown
    assert hyphen_parts("to sre-admins, the admin group")[0] == {"sre", "admin"}


def test_a_state_is_no_action_and_again_or_monthly_is_not_the_one_off_job():
    assert states_only("My account is locked, please unlock it", {"lock", "unlock"}) == {"lock"}
    assert states_only("It is locked, now lock it", {"lock"}) == frozenset()
    job = JobEvidence.of(["Please refund my latest order, a@x.io"] * 4)
    for text, why in (
        ("Please refund my latest order again, b@x.io", "again"),
        ("Please refund my latest order monthly, b@x.io", "on a schedule"),
        ("Please refund my latest order every week, b@x.io", "on a schedule"),
    ):
        verdict = judge_intent(job, read_request(text))
        assert verdict.verdict != "run" and any(why in r for r in verdict.reasons), verdict
    plain = judge_intent(job, read_request("I was charged again, please refund my latest order"))
    assert not any("again" in r for r in plain.reasons), plain
