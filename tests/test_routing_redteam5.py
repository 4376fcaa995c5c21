"""Near misses a fifth hostile probe (redteam5) found the gate running, through real
``create_agent`` agents on both stores: a value named twice, the noun after it governing
(``cancel my reservation ZFA04Y account``: the account is cancelled); ``got``/``had`` + the
thing + a participle (``I got reservation ZFA04Y cancelled``: a report); a question word
whose preposition ends the question (``Where is my order from?``: the origin, not the
status); the job's verb taking a value of another input as its whole object (``cancel
mia_li_3668 for reservation ZFA04Y``: the user is cancelled). The requests that name the
same job in the same words (``I'd like to get reservation … cancelled``, ``cancel
mia_li_3668's reservation …``, ``reservation … user id …``) still run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, SHOP, WORLDS, Desk, approve, world

from soloflow_core.memory.forms import acted_values, around_values, had_done, stranded
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store

FOUND = {
    AIRLINE: [
        # the noun after the value governs
        "Please cancel my reservation ZFA04Y account, I am mia_li_3668",
        "Please cancel my reservation ZFA04Y user account, I am mia_li_3668",
        # got / had + the thing + a participle: a report
        "Please, I got reservation ZFA04Y cancelled, I am mia_li_3668",
        "Please, I had reservation ZFA04Y cancelled, I am mia_li_3668",
        "I've had reservation ZFA04Y cancelled, user mia_li_3668",
        # the job's verb acting on the user id
        "Please cancel mia_li_3668 for reservation ZFA04Y",
        "Please cancel mia_li_3668, reservation ZFA04Y",
        "Please cancel mia_li_3668 with reservation ZFA04Y",
        "Please cancel mia_li_3668 and reservation ZFA04Y",
        # (fixed on main by the object rule; kept pinned)
        "Please cancel the account of user mia_li_3668 with reservation ZFA04Y",
        # a preposition ending the question
        "What is flight HAT066 on 2024-05-24 for?",
        "How many free checked bags do I get on reservation 8T3C0G for?",
    ],
    SHOP: [
        "Where is my order from? bob@example.org",
        "Where is my order shipping to? bob@example.org",
        "Who is my order for? bob@example.org",
    ],
}
GENUINE = {
    AIRLINE: [
        "Please cancel my reservation ZFA04Y, I am mia_li_3668",
        "Please cancel ZFA04Y for user mia_li_3668",
        "Please cancel mia_li_3668's reservation ZFA04Y",
        "Please cancel reservation ZFA04Y user id mia_li_3668",
        "Please cancel reservation ZFA04Y account mia_li_3668",
        "I'd like to get reservation ZFA04Y cancelled, user mia_li_3668",
        "Could I have reservation ZFA04Y cancelled? user mia_li_3668",
        "Please set 3 checked bags for my reservation U9OVSK",
    ],
    SHOP: [
        "Where is my order? bob@example.org",
        "Please reset my password, alice@example.com account",
        "Please refund my latest order bob@example.org account",
    ],
}


@pytest.mark.parametrize("name", WORLDS)
def test_value_heads_causative_reports_stranded_prepositions_and_bare_objects_run_no_flow(
    trained_store: Callable[[str], Store], name: str
) -> None:
    w = world(name)
    store = trained_store(name)
    approve(store, w)
    w.module.EFFECTS.clear()
    try:
        with Desk(store, w) as desk:
            # the same job in the same words still runs without the model, with its values
            for text in GENUINE[name]:
                d = desk.mw.route(text)
                assert d.run is not None, (text, d.reason)
            got = desk.ask(GENUINE[name][0])
            assert got["calls"] == 0 and got["flow"] is not None and got["effects"]
            ran = []
            for text in FOUND[name]:
                got = desk.ask(text)
                if got["flow"] is not None or got["calls"] == 0 or got["effects"]:
                    ran.append((text, got))
            assert ran == []
    finally:
        w.module.EFFECTS.clear()


def test_the_noun_after_a_value_named_before_it_governs():
    cancel = [
        "Please cancel reservation AB12CD for user ann_li_1",
        "cancel my reservation XY34ZW, user id bob_ko_2",
        "Can you cancel booking QW56ER on my account cy_do_3?",
    ]
    ev = JobEvidence.of(cancel * 2)
    assert {"reservation", "account", "user"} <= ev.namers
    read = read_request("Please cancel my reservation ZFA04Y account, I am mia_li_3668")
    assert ("reservation", "account") in read.around
    verdict = judge_intent(ev, read)
    assert verdict.verdict != "run" and any("names a account" in r for r in verdict.reasons)
    # a noun naming the next value, or a value with no noun before it, governs nothing
    for text in ("Please cancel reservation ZFA04Y user id mia_li_3668", "ok, a@x.io account"):
        assert all(not b or not a for b, a in read_request(text).around), text
    assert around_values([["x", "qv", "y"]], content=lambda s: s, value="qv") == (("x", "y"),)


def test_got_or_had_the_thing_done_is_a_report_get_or_have_asks():
    assert read_request("Please, I got reservation ZFA04Y cancelled").reported == ("cancel",)
    assert read_request("I've had my order refunded, please").reported == ("refund",)
    for asks in (
        "I'd like to get reservation ZFA04Y cancelled",
        "Could I have reservation ZFA04Y cancelled?",
        "I got sick, so please cancel reservation ZFA04Y",
        "I had hoped to get it cancelled, please cancel it",
    ):
        assert read_request(asks).reported == (), asks
    past = {"cancelled": "cancel"}.get
    assert had_done([["i", "got", "it", "cancelled"]], past=past, subjects=frozenset({"i"}))
    assert not had_done([["to", "got", "it", "cancelled"]], past=past, subjects=frozenset({"i"}))


def test_a_preposition_ending_a_question_asks_another_question():
    assert stranded("Where is my order from?") == "from"
    assert stranded("Where is my order?") == "" and stranded("Where is it from") == ""
    assert read_request("Where is my order from? bob@x.io").leads == ("where from",)
    assert read_request("Where is my order? bob@x.io").leads == ("where",)
    # a value after the preposition is its object: nothing is stranded
    assert read_request("What is the status of flight HAT115 for 2024-05-19?").leads == ("what",)
    ev = JobEvidence.of(["Where is my order? a@x.io", "where is my order b@x.io"] * 2)
    assert judge_intent(ev, read_request("Where is my order? c@x.io")).verdict == "run"
    assert judge_intent(ev, read_request("Where is my order from? c@x.io")).verdict != "run"


def test_a_value_the_verb_takes_whole_is_its_object():
    text = "Please cancel mia_li_3668 for reservation ZFA04Y"
    values = ("mia_li_3668", "ZFA04Y")
    assert acted_values(text, values, verbs=frozenset({"cancel"})) == (("cancel", "mia_li_3668"),)
    for whole in ("cancel the ZFA04Y, please", "cancel ZFA04Y"):
        assert acted_values(whole, ("ZFA04Y",), verbs=frozenset({"cancel"})), whole
    for part in ("cancel mia_li_3668's reservation", "set 3 checked bags", "cancel it, ZFA04Y"):
        value = next(v for v in ("mia_li_3668", "3", "ZFA04Y") if v in part)
        assert acted_values(part, (value,), verbs=frozenset({"cancel", "set"})) == (), part
