"""The harmful near misses left by the third blind probe (probe12) and the terse requests the
gate now serves, through real ``create_agent`` agents on both stores: a value as the subject
of any past verb (``E-3333 broke my laptop, I need a replacement``), a compound naming
another thing (``order a laptop screen``), a noun made from a verb before a number
(``update reservation 2 to RTY890 checked bags``), a payment subject cut short by a comma
before a second phrase (``subject Rent, for the flat``), and a verb given another kind of
value than the job's texts give it (``Invite EVT-2101 to zoe@…``). The job's own verb with
a value as its whole object is enough when the job's texts say it so (``Invite zoe@… to
EVT-2101``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, BANK, HELPDESK, WORKSPACE, desk_checks, world

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
GENUINE = {
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


@pytest.mark.parametrize("name", [HELPDESK, AIRLINE, BANK, WORKSPACE])
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
