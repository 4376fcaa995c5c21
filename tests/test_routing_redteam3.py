"""Near misses a hostile review (redteam3) found the gate running in both worlds, through
real ``create_agent`` agents: a past form reporting what was done (``Cancelled my
reservation …?``, ``you refunded my order?``), a statement asked back (``you reset my
password?``), the request itself cancelled (``cancel my request to cancel …``), a negation
typed ``do'nt`` or ``do n't``, an emoji saying no, a count glued to a sign (``-1``,
``1+1``, ``10%``, ``$1``), and *email* used as a verb for a flow that sends nothing (``email
alice@… and refund my order``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, SHOP, WORLDS, Desk, approve, world

from soloflow_core.generalize.arguments import learn_extraction
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store

FOUND = {
    AIRLINE: [
        "Cancelled reservation CQT8JK for user chen_ahmed_4886",
        "Cancelled my reservation 6I3PS6? User id liam_patel_5365",
        "You cancelled my reservation 6I3PS6?? Please, I am liam_patel_5365",
        "I need to know, you cancelled my reservation 6I3PS6? User id liam_patel_5365",
        "Please, I cancelled my reservation UF5KFE. I am mia_wang_1666",
        "Updated my booking PY7FF2 to 2 checked bags?",
        "Please cancel my request to cancel reservation CQT8JK for user chen_ahmed_4886",
        "Cancel this request: please cancel reservation CQT8JK for user chen_ahmed_4886",
        "Please cancel reservation CQT8JK for user chen_ahmed_4886 🙅",
        "Please do'nt check my baggage allowance for booking L7SPO6",
        "Can you do n't tell me the free baggage allowance on reservation 971BL6?",
        "Please update reservation B6HDF4 to -1 checked bags",
        "Please update reservation B6HDF4 to 1+1 checked bags",
        "Please update reservation B6HDF4 to 10% checked bags",
        "Please update reservation B6HDF4 to $1 checked bags",
        # asking whether the job's action can be done, not for it
        "I'd like to know, can you cancel my reservation 6I3PS6? User id liam_patel_5365",
        "Can you cancel my reservation 6I3PS6 or can I? User id liam_patel_5365",
        "Could you let me know: can you cancel reservation CQT8JK for user chen_ahmed_4886?",
    ],
    SHOP: [
        "Refunded my latest order? bob@example.org",
        "You refunded my latest order? Please, bob@example.org",
        "I need to know, you reset my password? alice@example.com",
        "Emailed me my latest invoice? alice@example.com",
        "You sent my latest invoice to bob@example.org? please",
        "refund my latest order please, bob@example.org ❌",
        "reset password bob@example.org 🚫",
        # e-mail said as a verb: a second action the refund flow does not do
        "Please email alice@example.com and refund my latest order",
        "Refund my latest order, bob@example.org, and email me the details",
        "Can you tell me if you can refund my latest order? bob@example.org",
    ],
}


@pytest.mark.parametrize("name", WORLDS)
def test_reports_retractions_typos_emoji_and_glued_counts_run_no_flow(
    trained_sqlite: Callable[[str], Store], name: str
) -> None:
    w = world(name)
    sqlite_store = trained_sqlite(name)
    approve(sqlite_store, w)
    w.module.EFFECTS.clear()
    try:
        with Desk(sqlite_store, w) as desk:
            # the job itself, with the same words, still runs
            train = [r for r in w.module.load_corpus() if r["split"] == "train"]
            assert any(desk.mw.route(r["text"]).run for r in train)
            ran = []
            for text in FOUND[name]:
                got = desk.ask(text)
                if got["flow"] is not None or got["calls"] == 0 or got["effects"]:
                    ran.append((text, got))
            assert ran == []
    finally:
        w.module.EFFECTS.clear()


def test_a_past_form_opening_a_clause_or_after_a_subject_is_a_report():
    assert read_request("Refunded my latest order? a@x.io").reported == ("refund",)
    assert read_request("Please, I cancelled my reservation ZFA04Y").reported == ("cancel",)
    assert read_request("You sent my invoice?").reported == ("send",)
    # a past participle after its object asks for the action
    assert read_request("I need my reservation ZFA04Y cancelled, please").reported == ()
    assert read_request("Can I get reservation ZFA04Y cancelled please?").reported == ()
    assert "you" in read_request("I need to know, you reset my password? a@x.io").leads


def test_negation_typos_and_a_cancelled_request():
    assert "reset" in read_request("Please do'nt reset my password").negated
    assert "reset" in read_request("Please do n't reset my password").negated
    assert read_request("Cancel my request to cancel reservation ZFA04Y").flags


def test_a_count_learned_from_positive_examples_has_no_sign_and_its_labels_skip_ids():
    rule = learn_extraction(["2", "1"], ["Update booking PY7FF2 to 2 bags", "Set to 1 bag"])
    assert rule is not None and rule["pattern"] == r"\d+"
    assert rule["labels"] == ["to"]


def test_email_as_a_verb_says_send_and_as_a_noun_does_not():
    from soloflow_core.memory.reading import says_send

    for verb in ("Please email alice@example.com the form", "refund it and email me", "e-mail it"):
        assert says_send(verb), verb
    for noun in ("my email bob@x.com, refund my order", "Email: bob@x.com", "account email a@b.c"):
        assert not says_send(noun), noun
