"""Routing against a store that later traffic taught: words the job learns from new requests
never let a near miss through.

The flows of a world are learned and approved as in ``test_routing.py``; then requests the
agent served (itself, or by calling the offered flow tool) become evidence of the job, and
the near misses that once ran against such a store are asked again: ``my old account`` (the
stream taught ``old`` from ``the old one is gone``) and ``… ZFA04Y cancellation`` (the
stream taught ``cancellation``). A request served by the offered flow tool is kept as
``flow_tool`` evidence, whose words need :data:`~soloflow_core.memory.intent.CONFIRMATIONS`
requests before they are known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from routing_support import AIRLINE, BANK, SHOP, WORKSPACE, Desk, World, approve, world

from benchmarks import routing_world as W
from soloflow_core.memory.evidence import phrasing
from soloflow_core.memory.intent import CONFIRMATIONS, JobEvidence, judge_intent
from soloflow_core.memory.reading import read_request
from soloflow_core.memory.which import picked_out
from soloflow_core.store import Store
from soloflow_langgraph.routing.tools import flow_tool_name

Trained = Callable[[str], Store]


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def _approved(store: Store, world_name: str, tool: str) -> tuple[World, str]:
    """The world with every learned flow approved, and the name of the flow ending in
    ``tool``."""
    w = world(world_name)
    approve(store, w)
    return w, next(m.name for m in store.list_flow_meta(**w.ns) if m.skill_keys[-1] == tool)


def _teach(store: Store, ns: dict[str, str], flow: str, texts: list[str]) -> None:
    store.add_flow_evidence(
        flow, [(f"stream-{i}", t) for i, t in enumerate(texts)], source="agent_run", **ns
    )


def test_a_noun_picked_out_of_several_is_no_run_even_when_the_job_knows_its_words(
    trained_store: Trained,
):
    store = trained_store(SHOP)
    w, name = _approved(store, SHOP, "reset_password")
    _teach(
        store,
        w.ns,
        name,
        [
            "Please reset my password, the old one is gone: kim@x.com",
            "Can you reset my password? The old one is gone. lee@x.com",
            "Reset my account password please, my old password is gone, ann@x.com",
        ],
    )
    with Desk(store, w) as desk:
        for text in (
            "Could you reset the password on my old account? zz@x.com",
            "Please reset the password of my other account zz@x.com",
            "Please reset the password of my work account, zz@x.com",
            "Reset the password on my previous account please: zz@x.com",
        ):
            route = desk.mw.route(text)
            assert route.run is None, (text, route)
            check = next(c for c in route.checks if c.name == name)
            assert any("picks one out of several" in r for r in check.reasons), check.reasons
        # what the stream taught still serves the job, with no model call
        got = desk.ask("Please reset the password of moe@x.com, the old one is gone")
        assert (got["flow"], got["calls"]) == (name, 0)
        assert [e["tool"] for e in got["effects"]] == ["reset_password"]


def test_a_noun_made_from_a_verb_after_the_value_governs_it(trained_store: Trained):
    store = trained_store(AIRLINE)
    w, name = _approved(store, AIRLINE, "cancel_reservation")
    _teach(
        store,
        w.ns,
        name,
        [
            "I'm sofia_khan_1935, please process the cancellation of reservation VHM262",
            "I need a cancellation of my reservation 4A0M39, I am user liam_patel_4853",
            "Please handle the cancellation: reservation R8AOIR, user omar_patel_1266",
        ],
    )
    with Desk(store, w) as desk:
        for text in (
            "I'm mia_li_3668, please cancel my reservation ZFA04Y cancellation",
            "I'm mia_li_3668, please cancel my reservation ZFA04Y payment",
        ):
            assert desk.mw.route(text).run is None, text
        assert desk.mw.route("I'm mia_li_3668, please cancel my reservation ZFA04Y").run == name


def test_picked_out_reads_the_noun_a_word_picks_out():
    assert picked_out("the password on my old account? zz@x.com") == (("old", "account"),)
    assert picked_out("cancel my other reservation ZFA04Y") == (("other", "reserv"),)
    assert picked_out("the old email address x") == (("old", "address"),)
    assert picked_out("I forgot the old one") == ()  # `one` alone is no noun
    assert picked_out("my work email a@b.c") == ()  # the value itself is named
    # known from the job's own texts: the way they pick it out is the job's
    seen = JobEvidence.of(["reset the password of my old account a@x.io"] * 3)
    asked = read_request("Please reset the password of my old account b@x.io")
    assert not any("picks one" in r for r in judge_intent(seen, asked).reasons)


def test_a_request_served_by_the_offered_flow_tool_is_flow_tool_evidence(
    trained_store: Trained,
):
    store = trained_store(SHOP)
    w, name = _approved(store, SHOP, "send_email")
    flow = store.get_flow(name, **w.ns).flow
    new_word = "Please send my most recent bill, pronto, to {}"
    with Desk(store, w) as desk:
        desk.model.flow_tool_for = {"invoice_email": flow_tool_name(flow)}
        taught: list[str] = []
        for i in range(CONFIRMATIONS + 1):
            text = new_word.format(f"u{i}@x.io")
            desk.model.label(text, "invoice_email", f"u{i}@x.io")
            got = desk.ask(text)
            if i < CONFIRMATIONS:  # `pronto` not yet known: the model chose the flow tool
                assert got["flow"] is None and got["calls"] >= 1, (i, got)
                taught.append(text)
            else:  # two requests the model served with the flow hold it: known
                assert (got["flow"], got["calls"]) == (name, 0), got
            sent = [e["args"]["to"] for e in got["effects"] if e["tool"] == "send_email"]
            assert sent == [f"u{i}@x.io"], got
    sources = dict(store.flow_evidence_sources([name], **w.ns)[name])
    assert all(sources.get(t) == "flow_tool" for t in taught), sources


_TRANSFER = "Transfer 1350 to NL80ABNA8708694040 subject Rent May"
_SENDS = [f"Please send {n} to DE{n:020d} with the subject 'Gift {n}'" for n in range(101, 109)]


def test_evidence_the_stream_adds_never_stops_what_the_learned_runs_let_run(
    trained_store: Trained,
):
    """A stream of `send …` requests makes `send` the verb most of the job's texts hold,
    so the grown evidence alone would decline a `Transfer …` request (the job's action not
    named) that the runs the flow was learned from let run: it still runs, once, with no
    model call. What those runs decline stays declined."""
    store = trained_store(BANK)
    w, name = _approved(store, BANK, "send_money")
    with Desk(store, w) as desk:
        assert desk.mw.route(_TRANSFER).run == name  # before the stream
    _teach(store, w.ns, name, _SENDS)
    texts = store.flow_evidence([name], **w.ns)[name]
    grown = judge_intent(JobEvidence.of(texts), read_request(_TRANSFER), own_actions={"send"})
    assert any("does not name the job's action (send)" in r for r in grown.reasons), grown
    with Desk(store, w) as desk:
        got = desk.ask(_TRANSFER)
        assert (got["flow"], got["calls"]) == (name, 0), got
        assert [(e["tool"], e["args"].get("amount")) for e in got["effects"]] == [
            ("send_money", 1350)
        ], got["effects"]
        for near in (
            "Don't transfer 1350 to NL80ABNA8708694040",
            "Did I transfer 1350 to NL80ABNA8708694040 last week?",
            "Transfer 1350 to NL80ABNA8708694040 subject Rent May and to DE00000000000000000101",
            "Check my balance before you send anything to NL80ABNA8708694040",
        ):
            route = desk.mw.route(near)
            assert route.run is None, (near, route.reason)


def test_a_request_worded_as_one_the_job_was_done_for_runs(trained_store: Trained):
    """`I can't make it, please cancel my meeting on …` is a training request of the
    workspace's cancel job, word for word; the rules alone decline it (`can't` negates
    `make`). Worded the same with a new date, it is the job: it runs once, with no model
    call. Any other wording is judged by the rules as before."""
    store = trained_store(WORKSPACE)
    w = world(WORKSPACE)
    approve(store, w)
    name = next(m.name for m in store.list_flow_meta(**w.ns) if m.skill_keys[-1] == "cancel_event")
    with Desk(store, w) as desk:
        got = desk.ask("I can't make it, please cancel my meeting on 2027-01-05")
        assert (got["flow"], got["calls"]) == (name, 0), got
        assert [e["tool"] for e in got["effects"]] == ["cancel_event"], got["effects"]
        for near in (
            "I can't make it, please don't cancel my meeting on 2027-01-05",
            "I can't make it, please cancel my meeting on 2027-01-05 and 2027-01-06",
            "I can't make it, please cancel my meeting on 2027-01-05?",
            "I can't make it, please cancel my meeting on 2027-01-05...",
            "I can't make it, cancelled my meeting on 2027-01-05",
            "I can't make it, please cancel tom@x.io's meeting on 2027-01-05",
            "I can\u200bt make it, please cancel my meeting on 2027-01-05",
        ):
            route = desk.mw.route(near)
            assert route.run is None, (near, route.reason)


def test_a_wording_only_hinted_requests_or_two_jobs_hold_runs_nothing(trained_store: Trained):
    store = trained_store(BANK)
    w, name = _approved(store, BANK, "send_money")
    text = "Kindly wire 75 to DE62088177869897716232, memo Utilities"
    # what the model sent to the offered flow tool is no run of the job done unasked
    store.add_flow_evidence(
        name, [(f"hint-{i}", text) for i in range(CONFIRMATIONS - 1)], source="flow_tool", **w.ns
    )
    with Desk(store, w) as desk:
        assert desk.mw.route("Kindly wire 80 to DE62088177869897716232, memo Utilities").run is None
    job = JobEvidence.of(["send 5 to DE00000000000000000001 now"] * 3)
    assert phrasing("Send 7 to DE00000000000000000002 NOW") in job.phrasings
    assert phrasing("Send 7 to DE00000000000000000002 now!") not in job.phrasings
    # a wording the agent did two jobs for tells neither
    worded = "Sort out the payments, send money to DE62088177869897716232: 75, subject Gas"
    _teach(store, w.ns, name, [worded] * 3)
    with Desk(store, w) as desk:
        assert desk.mw.route(worded).run == name
    other = next(
        m.name for m in store.list_flow_meta(**w.ns) if m.skill_keys[-1] == "get_payments_to"
    )
    store.add_flow_evidence(
        other, [(f"other-{i}", worded) for i in range(3)], source="agent_run", **w.ns
    )
    with Desk(store, w) as desk:
        route = desk.mw.route(worded)
        assert route.run is None and {c.name for c in route.checks} >= {name, other}, route


def test_a_wording_that_negates_the_jobs_action_is_never_the_job(trained_store: Trained):
    """Were a run of the job done for `Don't send …` (the agent erred), that wording still
    runs nothing unasked."""
    store = trained_store(BANK)
    w, name = _approved(store, BANK, "send_money")
    wrong = "Please don't send 60 to DE62088177869897716232, subject Rent"
    _teach(store, w.ns, name, [wrong] * 3)
    with Desk(store, w) as desk:
        route = desk.mw.route("Please don't send 70 to DE62088177869897716232, subject Rent")
        assert route.run is None, route.reason
        assert any("negates send" in r for c in route.checks for r in c.reasons), route
