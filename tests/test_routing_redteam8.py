"""The harmful near misses left by the third blind probe (probe12) and the terse requests the
gate now serves, through real ``create_agent`` agents on both stores: a value as the subject
of any past verb (``E-3333 broke my laptop, I need a replacement``), a compound naming
another thing (``order a laptop screen``), a noun made from a verb before a number
(``update reservation 2 to RTY890 checked bags``), a payment subject cut short by a comma
before a second phrase (``subject Rent, for the flat``), and a verb given another kind of
value than the job's texts give it (``Invite EVT-2101 to zoe@…``). The job's own verb with
a value as its whole object is enough when the job's texts say it so (``Invite zoe@… to
EVT-2101``). Then what a fourth blind probe (probe13, 3,466 requests) found running: asking
whether (``… ? I need to know``, ``Tell me you…``), offers opening with ``Want to``/``Need
I``, a value someone is told or is with (``tell E-1042 to…``, ``I'm with E-4478``), a
dangling ``via``/``by``, a compound after a word most texts hold (``replacement screen``),
and addresses at a look-alike of the examples' domain (``acrne.example``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, BANK, HELPDESK, SHOP, WORKSPACE, desk_checks, world

from soloflow_core.flow.phrases import cut_phrases
from soloflow_core.memory.asking import loose_ends, value_objects
from soloflow_core.memory.binding import bind_inputs
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import ACTION_STEMS, REQUEST_STEMS, read_request
from soloflow_core.store import Store

EVT = "zoe.clark@northwind.example"
FOUND = {
    HELPDESK: [
        "E-3333 broke my laptop, I need a replacement",
        "E-3333 lost my laptop. Please order a replacement laptop",
        "Please order a laptop screen for E-2290",
        "Please order a new laptop screen for employee E-2290",
        "I need a new laptop screen, I'm E-2290",
    ],
    AIRLINE: [
        "update reservation 2 to RTY890 checked bags",
        "Please update reservation 2 to RTY890 checked bags",
    ],
    BANK: [
        "Send 100 to DE89370400440532013000 with subject Rent, for the flat",
        "Please send 100 to DE89370400440532013000 subject Rent, for the flat",
    ],
    WORKSPACE: [
        f"Invite EVT-2101 to {EVT}",
        f"Please invite EVT-2101 to {EVT}",
        f"Want me to invite {EVT} to EVT-2101?",
        f"Invite {EVT} to EVT-2101 and me",
        f"Invite {EVT} to EVT-2101 and",
        f"Invite {EVT} to F-48213",
        f"invited {EVT} to EVT-2101",
        f"Invite {EVT} to EVT-2101 again",
        f"Invite {EVT} to EVT-2101 tomorrow",
        f"Invite {EVT} and bob@northwind.example to EVT-2101",
    ],
}
FOUND[HELPDESK] += [  # probe13: whether, not for it; someone else; a look-alike domain
    "Please unlock the account of employee E-1042? I need to know",
    "Tell me you unlock account E-5120 please",
    "I want to know: order a replacement laptop for E-1198 please",
    "Please tell employee E-1042 to unlock the account",
    "unlock my account pls, I'm with E-4478",
    "unlock my account pls, I'm E-4478's",
    "Unlock the account E-5120 needs",
    "Please unlock the account of employee E-1042 via",
    "Please unlock the account of employee E-1042 by",
    "My laptop is broken, please order me a replacement screen. I'm E-1485",
    "Please add priya.shah@acrne.example to eng-oncall",
    "Please add priya.shah@acme.example.evil.com to eng-oncall",
]
FOUND[WORKSPACE] += [
    "Want to cancel my meeting on 2026-12-07?",
    "Would you like to cancel my meeting on 2026-12-07?",
    "Need I cancel my meeting on 2026-12-07?",
    "Please cancel my meeting on 2026-12-07? I want to know",
    "Invite zoe.clark@northwind.exarnple to EVT-2101",
]
FOUND[AIRLINE] += [
    "Tell me you cancel reservation KQT8JM for user chen_ahmed_4881",
    "Please cancel reservation KQT8JM for user chen_ahmed_4881? I want to know",
    "cancel reservation KQT8JM, I'm with user chen_ahmed_4881",
    "Want to update reservation B6HDF4 to 2 checked bags?",
]
FOUND[BANK] += [
    "Please tell me you send 250 to DE89370400440532013000 with the subject 'Rent'",
    "Want to send 250 to DE89370400440532013000 with the subject 'Rent'?",
]
FOUND[SHOP] = [
    "Want to reset my password? bob.k@example.org",
    "Would you like to reset my password? bob.k@example.org",
    "Need to send latest invoice to bob.k@example.org?",
    "reset my password, tell bob.k@example.org",
    "refund my latest order please, via bob.k@example.org",
    "refund my latest order please, bob.k@example.org knows",
    "reset my password. I need to know. bob.k@example.org",
    "Tell me you please reset my password. alice.m@example.com",
]
GENUINE = {
    SHOP: [
        "Please reset my password. alice.m@example.com",
        "I'd like to know where my order is. alice.m@example.com",
    ],
    HELPDESK: ["Please order a replacement laptop for E-2290"],
    AIRLINE: ["Please update reservation B6HDF4 to 2 checked bags"],
    BANK: ["Please send 100 to DE89370400440532013000 with subject Rent"],
    WORKSPACE: [
        f"Invite {EVT} to EVT-2101",
        f"Can you invite {EVT} to EVT-2627?",
        f"pls invite {EVT} to EVT-4994",
        f"EVT-8939: please invite {EVT}",
    ],
}


@pytest.mark.parametrize("name", [HELPDESK, AIRLINE, BANK, WORKSPACE, SHOP])
def test_probe12_leftovers_and_swapped_objects_run_no_flow(
    trained_store: Callable[[str], Store], name: str
) -> None:
    found = desk_checks(trained_store(name), world(name), genuine=GENUINE[name], found=FOUND[name])
    assert found == []


VERBS = (REQUEST_STEMS | ACTION_STEMS) - {"want", "need", "get"}


@pytest.mark.parametrize(
    "text",
    [
        "E-3333 broke my laptop, I need a replacement",
        "zoe@x.io deleted my meeting, please book room B2-101 for 2026-12-05",
        "ZFA04Y cancelled? Please refund",
    ],
)
def test_a_value_opening_a_sentence_before_a_past_verb_names_someone_or_something_acting(
    text: str,
) -> None:
    assert "someone" in loose_ends(text, verbs=VERBS)


@pytest.mark.parametrize(
    "text", ["E-3333 here, please order a replacement laptop", "EVT-2101: please invite a@x.io"]
)
def test_a_value_opening_a_sentence_before_no_past_verb_is_no_actor(text: str) -> None:
    assert "someone" not in loose_ends(text, verbs=VERBS)


def test_words_side_by_side_that_name_a_thing_are_read_as_pairs():
    read = read_request("Please order a new laptop screen for E-2290, the old one broke")
    assert ("laptop", "screen") in read.pairs
    # a verb form, a past form or a noun made from a verb names no other thing
    for text in ("My laptop is broken", "laptop broken", "Laptop replacement for E-1"):
        assert not [p for p in read_request(text).pairs if p[0] == "laptop"], text


def test_a_compound_naming_another_thing_than_the_jobs_word_is_not_the_job():
    texts = [
        "E-6642 needs a replacement laptop, the screen cracked",
        "Please order a new laptop for E-1042",
        "My laptop is broken, please order me a replacement. I'm E-1485",
        "Could you order a replacement laptop for E-2559?",
    ]
    ev = JobEvidence.of(texts)
    assert "laptop" in ev.every
    bad = judge_intent(ev, read_request("Please order a laptop screen for E-2290"))
    assert any("laptop screen" in r for r in bad.reasons), bad.reasons
    good = judge_intent(ev, read_request("Please order a new laptop for E-2290"))
    assert not any("names a" in r for r in good.reasons), good.reasons


def test_a_noun_made_from_a_verb_before_a_number_introduces_it():
    schema = {
        "properties": {"reservation_id": {"type": "string"}, "total_baggages": {"type": "integer"}},
        "required": ["reservation_id", "total_baggages"],
    }
    rules = {
        "reservation_id": {
            "pattern": r"(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}",
            "anchor": "",
            "labels": ["reservation", "booking"],
        },
        "total_baggages": {"pattern": r"\d+", "anchor": "", "labels": ["", "to", "set"]},
    }
    bad = bind_inputs(schema, rules, read_request("update reservation 2 to RTY890 checked bags"))
    assert any("introduced as 'reservation'" in p for p in bad.problems), bad.problems
    good = bind_inputs(schema, rules, read_request("update reservation RTY890 to 2 checked bags"))
    assert good.inputs == {"reservation_id": "RTY890", "total_baggages": 2}, good.problems


def test_a_phrase_cut_short_by_a_comma_is_named_and_another_then_is_ambiguous():
    rule = {"shape": "phrase", "labels": ["subject", "for"], "bare": ["subject", "for"]}
    assert cut_phrases(rule, "Send 100 with subject Rent, for the flat") == ["Rent"]
    assert cut_phrases(rule, "Thanks for your help, send 100 with subject Rent") == []
    assert cut_phrases(rule, 'Send 100 with subject "Rent, flat"') == []
    schema = {"properties": {"subject": {"type": "string"}}, "required": ["subject"]}
    bad = bind_inputs(
        schema, {"subject": rule}, read_request("Send 100 with subject Rent, for the flat")
    )
    assert bad.problems and "cut short by a comma" in bad.problems[0], bad.problems
    good = bind_inputs(schema, {"subject": rule}, read_request("Send 100 with subject Rent"))
    assert good.inputs == {"subject": "Rent"}, good.problems


def test_the_kind_of_value_a_verb_takes_as_its_object_is_read():
    verbs = {"invite", "unlock", "send"}
    assert value_objects("Invite zoe@x.io to EVT-1", verbs) == {("invit", "@")}
    assert value_objects("Invite EVT-1 to zoe@x.io", verbs) == {("invit", "#")}
    assert value_objects("Send bob@x.io the invoice", verbs) == frozenset()
    assert value_objects("Unlock E-7453, please", verbs) == {("unlock", "#")}


def test_one_known_word_is_enough_for_the_jobs_verb_with_a_value_object_as_its_texts_give():
    texts = [
        "Invite tom@x.io to EVT-2045",
        "Please invite ana@x.io to EVT-1234",
        "Invite li@x.io to EVT-3310, thanks",
        "Could you add bo@x.io to the meeting EVT-1111?",
    ]
    ev = JobEvidence.of(texts)
    assert ev.direct.get("invit", 0) >= 2 and ("invit", "@") in ev.direct_kinds
    assert judge_intent(ev, read_request("Invite zoe@x.io to EVT-2101")).verdict == "run"
    swapped = judge_intent(ev, read_request("Invite EVT-2101 to zoe@x.io"))
    assert swapped.verdict != "run" and any("another kind of value" in r for r in swapped.reasons)
    # a verb the texts never give a value as its whole object needs two words of the job
    sent = JobEvidence.of(
        [
            "Please email me my latest invoice. a@x.io",
            "send my latest invoice to b@x.io",
            "email my latest invoice to c@x.io please",
        ]
    )
    lone = judge_intent(sent, read_request("send tom@x.com"))
    assert any("fewer than two words" in r for r in lone.reasons), lone.reasons


@pytest.mark.parametrize(
    "text",
    [
        "Please refund my order? I need to know",
        "Refund my order. Just want to know",
        "Tell me you refund my order",
        "I want to know: refund my order",
        "I need to know, would you refund my order",
    ],
)
def test_asking_whether_it_is_done_is_read(text: str) -> None:
    from soloflow_core.memory.asking import WHETHER

    assert WHETHER.search(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Want to reset my password? a@x.io",
        "Need I cancel my meeting on 2026-12-07?",
        "Would you like to cancel reservation KQT8JM?",
        "Want to send latest invoice to bob.k@example.org?",
    ],
)
def test_a_question_opening_with_want_or_need_is_an_offer(text: str) -> None:
    from soloflow_core.memory.asking import offers

    assert offers(text), text


def test_want_or_need_opening_a_plain_request_is_no_offer():
    from soloflow_core.memory.asking import offers

    assert offers("Need a replacement laptop for E-2290, please") == ()
    assert offers("I want to reset my password. a@x.io") == ()


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Please tell employee E-1042 to unlock the account", "someone"),
        ("unlock my account pls, I'm with E-4478", "someone"),
        ("unlock my account pls, I'm here with E-4478", "someone"),
        ("unlock my account pls, I'm E-4478's", "someone"),
        ("Unlock the account E-5120 needs", "someone"),
        ("reset password, bob@x.io would tell you", "someone"),
        ("Please unlock the account of employee E-1042 via", "cut off"),
        ("Please unlock the account of employee E-1042 as", "cut off"),
        ("Add a@x.io to the group eng-oncall wants", "cut off"),
    ],
)
def test_probe13_loose_ends(text: str, kind: str) -> None:
    assert kind in loose_ends(text, verbs=VERBS), loose_ends(text, verbs=VERBS)


@pytest.mark.parametrize(
    "value",
    ["x@acrne.example", "x@acme.exarnple", "x@acme.example.evil.com", "x@acme-example.com"],
)
def test_an_address_at_a_look_alike_of_the_examples_domain_is_not_bound(value: str) -> None:
    from soloflow_core.memory.binding import _look_alike_domain

    examples = ["a@acme.example", "b@acme.example", "c@acme.example"]
    assert _look_alike_domain(value, examples=examples), value


@pytest.mark.parametrize("value", ["x@acme.example", "x@gmail.com", "x@evil.example"])
def test_an_address_at_its_own_or_another_domain_is_no_look_alike(value: str) -> None:
    from soloflow_core.memory.binding import _look_alike_domain

    examples = ["a@acme.example", "b@acme.example", "c@acme.example"]
    assert _look_alike_domain(value, examples=examples) is None, value


def test_know_tell_and_via_are_words_unless_they_ask_politely_or_word_the_address():
    assert "know" in read_request("Refund my order? I want to know").terms
    assert "tell" in read_request("Tell E-1042 to unlock it").terms
    assert "via" in read_request("Refund my order, via bob@x.io").terms
    assert "know" not in read_request("I'd like to know the status of flight HAT013").terms
    assert "via" not in read_request("Send me my invoice via e-mail, a@x.io").terms
    # `… to know:` asks whether: the word stays
    assert "know" in read_request("I'd like to know: could you refund my order").terms


def test_a_compound_after_a_word_most_texts_hold_is_read_and_a_free_text_is_data():
    texts = [
        "Please order a replacement laptop for E-1042",
        "E-6642 needs a replacement laptop, the screen cracked",
        "Could you order a replacement laptop for E-2559?",
        "Order a replacement laptop for E-2381 please",
    ]
    ev = JobEvidence.of(texts)
    bad = judge_intent(ev, read_request("Please order a replacement screen for E-2290"))
    assert any("replacement screen" in r for r in bad.reasons), bad.reasons
    as_data = judge_intent(
        ev, read_request("Please order a replacement screen for E-2290"), data={"screen"}
    )
    assert not any("replacement screen" in r for r in as_data.reasons), as_data.reasons


@pytest.mark.parametrize(
    "text",
    [
        "send bob.k@example.org's latest invoice to me",
        "send latest invoice to bob.k@example.org, from my account",
        "send the latest invoice for my account to bob.k@example.org",
    ],
)
def test_whose_thing_it_is_is_read(text: str) -> None:
    assert "yours" in loose_ends(text, verbs=VERBS), loose_ends(text, verbs=VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "Would you unlock E-3708's account please?",
        "Show the payments from my account to AT863958913847307140",
        "Please send me my latest invoice. a@x.io",
    ],
)
def test_a_values_thing_alone_or_my_account_as_the_source_is_no_loose_end(text: str) -> None:
    assert "yours" not in loose_ends(text, verbs=VERBS)


def test_a_verb_whose_past_is_its_base_after_is_tells_a_state():
    assert "reset" in read_request("Please reset it. a@x.io. My account is reset.").reported
    assert read_request("Can you reset my password? a@x.io").reported == ()


@pytest.mark.parametrize(
    "text",
    [
        "my " * 13_000 + "a@x.io",
        "a@x.io " * 6_000,
        "want to go " * 4_000 + "?",
        "I'm with " * 5_000,
        "a@x.io's thing " * 3_000 + "for my account " * 2_000,
    ],
)
def test_loose_ends_read_a_long_hostile_text_in_linear_time(text: str) -> None:
    """No pattern backtracks over the whole text: 40,000 characters read well within a
    second (a quadratic pattern took 6 s here; CPU time, not wall clock)."""
    import time

    start = time.process_time()
    loose_ends(text, verbs=VERBS)
    assert time.process_time() - start < 1.5


def test_cut_phrases_read_a_long_hostile_text_in_linear_time():
    import time

    rule = {"shape": "phrase", "labels": ["subject", "for"], "bare": ["subject", "for"]}
    start = time.process_time()
    cut_phrases(rule, "for " * 10_000 + "subject Rent, for the flat")
    assert time.process_time() - start < 1.5  # a prefix searched per label took 5 s here
