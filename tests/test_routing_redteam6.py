"""Near misses a sixth, blind hostile probe (probe6, ``benchmarks/data/probe6_probes.json``)
found the gate running, through real ``create_agent`` agents on both stores: a number
qualified as a change (``add 2 more checked bags``: the flow sets the total to 2); a value
mixing full-width and plain digits (``kim_ng_４４１２``, ``HAT０６６``); ``wait`` standing
alone after the request (``… — wait``); a label opening the request before a colon
(``Log: please reset…``, ``Yesterday: …``); a quantifier over a noun the job's requests
never quantify (``… for all my accounts``: the flow reads one). Some ran only once the
evidence had grown from new phrasings of the job (``I'm still waiting…`` teaches ``wait``):
each test first asks those. The requests that name the same job in the same words still
run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, BANK, SHOP, Desk, approve, world

from soloflow_core.memory.forms import changed_by, quantified, unread_marks
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store

GROW = {  # new phrasings of the jobs from the world's corpus, asked first: evidence grows
    SHOP: [
        "I'm still waiting for my package. Can you see where it is? lena.k@tuta.io",
        "I can't log in to my account. harper.l@icloud.com",
        "I need a new password for my account, the old one doesn't work. connor.w@icloud.com",
        "Hello, I've been unable to access my account since yesterday because I don't "
        "remember my password. My account email is barbara.k@seniors.example.net. Could you "
        "please reset it?",
    ],
    AIRLINE: ["I'm bringing more luggage; please update reservation 55KF2U to 4 checked bags"],
    BANK: [],
}
FOUND = {
    SHOP: [
        "Where is my order? My email is alice@example.com — wait",
        "Where is my order? My email is alice@example.com. Hang on!",
        "Log: Please reset my password. alice@example.com",
        "Yesterday: Please reset my password. alice@example.com",
        "Old: Please reset my password. alice@example.com",
    ],
    AIRLINE: [
        "Please add 2 more checked bags to reservation H7YT2E",
        "Please update reservation H7YT2E to 2 more checked bags",
        "Cancel reservation L5KJ8H for user kim_ng_４４１２",
        "What is the status of flight HAT０６６ on 2024-05-24?",
    ],
    BANK: [
        "What transactions did I have on 2022-07-18 for all my accounts?",
        "Show me my transactions on 2022-03-28 for every account",
        "Please list my payments to IBAN DE30496577090601579357 for all my accounts",
    ],
}
GENUINE = {
    SHOP: [
        "Where is my order? My email is alice@example.com",
        "Please reset my password. alice@example.com",
    ],
    AIRLINE: [
        "Please update reservation H7YT2E to 2 checked bags",
        "Cancel reservation L5KJ8H for user kim_ng_4412",
        "What is the status of flight HAT066 on 2024-05-24?",
    ],
    BANK: [
        "What transactions did I have on 2022-07-18?",
        "Can you show me all transactions of 2022-12-22?",
    ],
}


@pytest.mark.parametrize("name", [SHOP, AIRLINE, BANK])
def test_changes_mixed_forms_wait_labels_and_quantifiers_run_no_flow(
    trained_store: Callable[[str], Store], name: str
) -> None:
    w = world(name)
    store = trained_store(name)
    approve(store, w)
    w.module.EFFECTS.clear()
    try:
        with Desk(store, w) as desk:
            for text in GROW[name]:
                desk.ask(text)
            for text in GENUINE[name]:
                d = desk.mw.route(text)
                assert d.run is not None, (text, d.checks[0].reasons if d.checks else None)
            got = desk.ask(GENUINE[name][0])
            assert got["calls"] == 0 and got["flow"] is not None and got["effects"]
            ran = []
            for text in FOUND[name]:
                got = desk.ask(text)
                if got["flow"] is not None or got["calls"] == 0:
                    ran.append((text, got))
            assert ran == []
    finally:
        w.module.EFFECTS.clear()


def test_a_number_qualified_as_a_change_is_no_value_of_the_job():
    values = ("2", "H7YT2E")
    for change in (
        "Please add 2 more checked bags to H7YT2E",
        "Please set 2 extra checked bags on H7YT2E",
        "Please add another 2 checked bags to H7YT2E",
        "Please add an additional 2 checked bags to H7YT2E",
        "Please increase the checked bags on H7YT2E by 2",
    ):
        assert changed_by(change, values) == ("2",), change
    for total in ("Please set 2 checked bags on H7YT2E", "no more bags: H7YT2E to 2 in total"):
        assert changed_by(total, values) == (), total
    sets = ["Please set 2 checked bags on A1", "Update B2 to 3 checked bags", "C3: 1 checked bag"]
    ev = JobEvidence.of(sets * 2)
    assert ev.changes == 0
    assert judge_intent(ev, read_request("Please set 4 checked bags on D4")).verdict == "run"
    verdict = judge_intent(ev, read_request("Please set 4 more checked bags on D4"))
    assert verdict.verdict != "run" and any("changes a quantity by 4" in r for r in verdict.reasons)
    # a job learned from changes knows them
    grows = ["Please add 2 more checked bags to A1", "add 1 more checked bag to B2"] * 2
    ev = JobEvidence.of(grows)
    assert judge_intent(ev, read_request("Please add 3 more checked bags to D4")).verdict == "run"


def test_a_word_mixing_full_width_and_plain_forms_is_not_one_value():
    for mixed in ("user kim_ng_４４１２", "flight HAT０６６", "send ２5 now"):
        assert any("full-width" in f for f in unread_marks(mixed, mixed)), mixed
    for whole in ("user ｋｉｍ_ｎｇ_４４１２", "flight ＨＡＴ０６６", "send 25 now", "café 2"):
        assert not any("full-width" in f for f in unread_marks(whole, whole)), whole


def test_wait_standing_alone_takes_the_request_back():
    for back in (
        "Where is my order? a@x.io — wait",
        "Where is my order? a@x.io. Wait!",
        "where's my order a@x.io, hold up",
        "Refund it, a@x.io... hang on",
    ):
        assert "it takes itself back" in read_request(back).flags, back
    for plain in (
        "I'm still waiting for my order, a@x.io",
        "I can't wait. Where is my order? a@x.io",
        "How long do I have to wait for my order? a@x.io",
    ):
        assert "it takes itself back" not in read_request(plain).flags, plain


def test_an_opening_label_and_a_new_quantifier_are_not_the_jobs_words():
    asks = [
        "Please reset my password a@x.io",
        "reset my password pls b@x.io",
        "I can't log in, reset my password c@x.io",
        "my old password fails, reset it d@x.io",
    ]
    ev = JobEvidence.of(asks * 2)
    assert judge_intent(ev, read_request("Please reset my password e@x.io")).verdict == "run"
    for label in ("Log: Please reset my password e@x.io", "Old: please reset my password e@x.io"):
        verdict = judge_intent(ev, read_request(label))
        assert verdict.verdict != "run" and any("opens with a label" in r for r in verdict.reasons)
    # a label naming its value, or a word of request, is no frame
    for named in ("Email: e@x.io, please reset my password", "Request: reset my password e@x.io"):
        assert not any("label" in r for r in judge_intent(ev, read_request(named)).reasons)
    assert quantified("Show my transactions for all my accounts") == ("account",)
    assert quantified("Thanks for all your help; that is all") == ()
    shows = [
        "Show me all transactions of 2022-01-02",
        "my account activity on 2022-01-03",
        "What happened on my account on 2022-01-04?",
    ]
    ev = JobEvidence.of(shows * 2)
    assert "transact" in ev.quantified and "account" not in ev.quantified
    verdict = judge_intent(
        ev, read_request("Show me all transactions of 2022-02-02 for every account")
    )
    assert verdict.verdict != "run" and any("all or every account" in r for r in verdict.reasons)
