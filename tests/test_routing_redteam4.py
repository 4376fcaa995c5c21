"""Near misses a fourth hostile probe (redteam4) found the gate running in both worlds, through
real ``create_agent`` agents on both stores: a sign outside ASCII saying no (``≠``, ``¬``,
``×``), an emoticon or a tone tag (``;)``, ``/s``), letters spelled apart (``N O T``,
``N.O.T.``), a dotted abbreviation (``e.g.``, ``i.e.``) or ``re`` (``RE:``, ``re-refund``)
read as nothing, a noun made from a verb opening a sentence read as that verb
(``reservation … cancel?``), a plural where the job names one thing (``refund my orders``),
a value after ``by``, ``from`` or ``as`` (another role: ``by 1`` is a change by an amount),
a state told (``is cancelled``, ``will be cancelled``), the speaker doing the action (``I
can cancel it myself``, ``let me reset…``), thanks for it done, ``tell me: …?`` and a tag
question (``…, right?``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, SHOP, WORLDS, Desk, approve, world

from soloflow_core.memory.binding import bind_inputs
from soloflow_core.memory.forms import joined_letters, unread_marks
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store

FOUND = {
    AIRLINE: [
        "Please cancel reservation ZFA04Y for user mia_li_3668 ≠",
        "Please cancel reservation ZFA04Y for user mia_li_3668 ×",
        "Please cancel reservation ZFA04Y for user mia_li_3668 /s",
        "Please N O T cancel reservation ZFA04Y for user mia_li_3668",
        "e.g. Please cancel reservation ZFA04Y for user mia_li_3668",
        "RE: Please cancel reservation ZFA04Y for user mia_li_3668",
        "Please re-cancel reservation ZFA04Y for user mia_li_3668",
        "reservation ZFA04Y cancel? mia_li_3668",
        "Please cancel reservations ZFA04Y for user mia_li_3668",
        "Please update reservation B6HDF4 by 1 checked bags",
        # a state told, the speaker acting, thanks for it done, a value in another role,
        # asking whether, a tag question
        "Please, reservation ZFA04Y is cancelled for user mia_li_3668",
        "Reservation ZFA04Y will be cancelled for user mia_li_3668, please",
        "I can cancel reservation ZFA04Y myself, user mia_li_3668, please",
        "Please, thanks for cancelling reservation ZFA04Y for user mia_li_3668",
        "Please cancel my account, user id mia_li_3668, booking ZFA04Y",
        "Please cancel reservation ZFA04Y by user mia_li_3668",
        "Tell me, cancel reservation ZFA04Y for user mia_li_3668?",
        "Please cancel reservation ZFA04Y for user mia_li_3668, right?",
    ],
    SHOP: [
        "Please refund my latest order, bob@example.org ¬",
        "Please reset my password. alice@example.com ∅",
        "refund my latest order please, bob@example.org ;)",
        "refund my latest order please, bob@example.org :P",
        "refund my latest order please, bob@example.org /j",
        "Please N-O-T refund my latest order, bob@example.org",
        "Please N.O.T. refund my latest order, bob@example.org",
        "Please D O N T reset my password. alice@example.com",
        "i.e. refund my latest order please, bob@example.org",
        "refund my latest order please, bob@example.org (e.g.)",
        "Please re-refund my latest order, bob@example.org",
        "Please refund my orders, bob@example.org",
        "Please refund my latest orders, bob@example.org",
        "Please email me my latest invoices. alice@example.com",
        "Please, my last order was refunded. bob@example.org",
        "Let me reset my password, please. alice@example.com",
        "Please, thank you for refunding my latest order, bob@example.org",
        "Please send latest invoice from bob@example.org",
        "Tell me: reset my password? alice@example.com",
        "Reset my password yes? alice@example.com",
        "I got a refund for my last order, please. bob@example.org",
        "alice@example.com wanted a password reset",
        "Please reset my account. alice@example.com",
        "Please refund my account. alice@example.com",
    ],
}


@pytest.mark.parametrize("name", WORLDS)
def test_signs_tone_tags_spelled_letters_abbreviations_plurals_and_by_run_no_flow(
    trained_store: Callable[[str], Store], name: str
) -> None:
    w = world(name)
    store = trained_store(name)
    approve(store, w)
    w.module.EFFECTS.clear()
    train = [r for r in w.module.load_corpus() if r["split"] == "train"]
    try:
        with Desk(store, w) as desk:
            # the job itself, with the same words, still runs without the model
            served = [r["text"] for r in train if desk.mw.route(r["text"]).run]
            assert served
            got = desk.ask(served[0])
            assert got["calls"] == 0 and got["flow"] is not None
            ran = []
            for text in FOUND[name]:
                got = desk.ask(text)
                if got["flow"] is not None or got["calls"] == 0 or got["effects"]:
                    ran.append((text, got))
            assert ran == []
    finally:
        w.module.EFFECTS.clear()


def test_letters_spelled_apart_and_dotted_abbreviations_are_one_word():
    assert joined_letters("Please N O T refund it") == "Please NOT refund it"
    assert joined_letters("Please D-O-N-T, N.O.T. now") == "Please DONT, NOT now"
    assert joined_letters("e.g. refund, i.e. now") == "eg refund, ie now"
    # addresses, hyphenated words and two letters apart are left as written
    for plain in ("j.o.k@x.io", "e-mail me", "a b", "Mr. J. Smith", "my a.b@c.io"):
        assert joined_letters(plain) == plain, plain
    assert "refund" in read_request("Please N O T refund my order").negated


def test_signs_emoticons_and_tone_tags_flag_the_request_plain_text_does_not():
    for text in ("refund it ≠", "refund it ¬", "refund it ×", "ok ;)", "ok :P", "sure /s", "x :-("):
        assert unread_marks(text, text), text
    for text in ("refund order 12: now", "Account: bob", "at 5:30 please", "a/b test", "1+1=2"):
        assert unread_marks(text, text) == [], text


def test_a_plural_the_job_never_uses_is_several_things():
    ev = JobEvidence.of(["refund my latest order"] * 4)
    assert read_request("refund my orders").plurals == ("order",)
    one = judge_intent(ev, read_request("please refund my latest order"))
    many = judge_intent(ev, read_request("please refund my latest orders"))
    assert one.verdict == "run"
    assert many.verdict != "run" and any("several" in r for r in many.reasons)
    # a job whose own requests use the plural (`checked bags`) keeps it
    bags = JobEvidence.of(["set 2 checked bags please"] * 4)
    assert judge_intent(bags, read_request("please set 3 checked bags")).verdict == "run"
    # question words and auxiliaries in -s are no plurals
    assert read_request("Whats the status? How many does it hold").plurals == ()


def test_a_noun_made_from_a_verb_opening_a_sentence_is_no_verb_of_request():
    assert read_request("reservation ZFA04Y cancel?").openers[0] == "reservation"
    assert read_request("Cancel reservation ZFA04Y").openers[0] == "cancel"


def test_a_count_after_by_is_a_change_not_the_count():
    schema = {"properties": {"n": {"type": "integer"}}, "required": ["n"]}
    rule = {"n": {"pattern": r"\d+", "labels": ["to"]}}
    assert bind_inputs(schema, rule, read_request("set bags to 2")).inputs == {"n": 2}
    by = bind_inputs(schema, rule, read_request("raise bags by 2"))
    assert not by.complete and "by" in by.problems[0]


def test_a_state_thanks_and_the_speaker_acting_are_no_request_and_asking_forms_are():
    from soloflow_core.memory.asking import MYSELF

    assert read_request("Reservation ZFA04Y is cancelled, please").reported == ("cancel",)
    assert read_request("It will be refunded, please").reported == ("refund",)
    assert read_request("Thank you for the refund, please").reported == ("refund",)
    assert read_request("I got a refund for my last order").reported == ("get",)
    assert read_request("bob@x.io needed a password reset").reported == ("need",)
    assert read_request("I got sick, so please cancel reservation ZFA04Y").reported == ()
    for asks in (
        "I'd like reservation ZFA04Y to be cancelled",
        "I need my reservation ZFA04Y cancelled, please",
        "I request that my latest invoice be sent to me",
        "Thanks for your help, please refund my latest order",
    ):
        assert read_request(asks).reported == (), asks
    assert MYSELF.search("Let me reset my password")
    assert MYSELF.search("ok, I can cancel it myself")
    assert not MYSELF.search("Could you tell me how many bags I can check for free?")
    assert "?" in read_request("Please cancel it, right?").leads
    assert "?" not in read_request("Could you cancel it for me, please?").leads


def test_a_value_after_by_from_or_as_has_another_role():
    schema = {"properties": {"to": {"type": "string"}}, "required": ["to"]}
    rule = {"to": {"pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"}}
    sent = bind_inputs(schema, rule, read_request("send it to bob@x.io"))
    assert sent.inputs == {"to": "bob@x.io"}
    for other in ("send it from bob@x.io", "send it as bob@x.io", "done by user bob@x.io"):
        assert not bind_inputs(schema, rule, read_request(other)).complete, other


def test_the_jobs_verb_acting_on_another_word_of_the_job_is_another_job():
    texts = [
        "Please reset my password, account a@x.io",
        "reset password b@x.io",
        "c@x.io password reset",
    ]
    ev = JobEvidence.of(texts * 2)
    assert ("reset", "password") in ev.objects
    assert judge_intent(ev, read_request("please reset my password, d@x.io")).verdict == "run"
    account = judge_intent(ev, read_request("please reset my account, d@x.io"))
    assert account.verdict != "run" and any("acts on" in r for r in account.reasons)
