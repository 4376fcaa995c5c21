"""Near misses a blind hostile probe (probe9, 361 requests over the five worlds) found the gate
running on main, through real ``create_agent`` agents on both stores: an offer (``Want me to
add…?``, ``Would you like me to…``), another person joined to the value (``… and me``,
``myself``, ``for you``), a request cut off (``… and``) or answered (``- got it``), a doubt
(``, really?``, ``‽``), a second action or destination (``… and add an event``, ``… and to
my meeting``), a time limit (``for now``), an id without its learned prefix bound as the
input (``F-48213`` as an event), an accented look-alike of the verb (``Invité``), ``again``
after a dotted address, and a number with nothing it counts (``… to 2``). Each must reach the
model; the plainly worded jobs still run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import AIRLINE, HELPDESK, SHOP, WORKSPACE, desk_checks, world

from soloflow_core.memory.asking import loose_ends, offers, speaker_acts
from soloflow_core.memory.binding import bind_inputs
from soloflow_core.memory.forms import repeated, unread_marks
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import ACTION_STEMS, REQUEST_STEMS, read_request
from soloflow_core.store import Store

ADD = "priya.shah@acme.example to eng-oncall"
ROOM = "room C3-329 for 2026-12-23"
EVT = "zoe.clark@northwind.example to the meeting EVT-2101"
FOUND = {
    HELPDESK: [
        f"Want me to add {ADD}?",
        f"Would you like me to add {ADD}?",
        f"Need me to add {ADD}?",
        f"Want us to book {ROOM}?",
        f"I'll go ahead and add {ADD}",
        f"I was about to book {ROOM}",
        f"Add {ADD} and me",
        "Add me and priya.shah@acme.example to eng-oncall",
        f"Add {ADD} myself",
        f"Add {ADD} for now",
        f"Please add {ADD} and yours",
        f"Book {ROOM} for you",
        f"Add {ADD} and",
        f"Add {ADD} or",
        f"Add {ADD}, really?",
        f"Add {ADD}‽",
        f"Add {ADD}⸮",
        f"Add {ADD} - got it",
        f"Add {ADD} n",
        "Addé priya.shah@acme.example to eng-oncall",
        # a second blind probe (probe11, 909 requests) on the first fixes
        "Can I please add omar.said@acme.example to eng-oncall?",
        "Please let me book room A3-215 for 2026-12-09",
        "Would you like me to order a replacement laptop for employee E-1618?",
        "Please unlock the account of employee E-3141 got it",
        "Please unlock the account of employee E-3141 okay",
        "Please unlock the account of employee E-3141 really?",
        "Please unlock the account of employee E-3141 ??",
        "Please book room A3-215 for 2026-12-09 …",
        "Please order a replacement laptop for employee E-1618...",
        "Please ordér a replacement laptop for employee E-1618",
        "Please unlock the accóunt of employee E-3141",
        "Please unlock the account of employee EVT-2101",
        "Please unlock the account of employee EE-3141",
        "Please unlock the account of employee E-31415926",
        "Please book room A3-2150 for 2026-12-09",
        "Please order a new laptop for employee E-3333? Or can you boot it?",
        "Please unlock the account of employee E-0000",
    ],
    WORKSPACE: [
        "Invite zoe.clark@northwind.example and me to the meeting EVT-2101",
        f"Please invite {EVT} and me",
        f"Please invite {EVT} and add an event",
        f"Please invite {EVT} and to my meeting",
        "Please invite zoe.clark@northwind.example to the meeting F-48213",
        "Please invite zoe.clark@northwind.example to the meeting MSG-123456",
        f"Invité {EVT}",
        f"Please invite {EVT} again",
        "Please invite zoe.clark@northwind.example to the meeting EVT-21",
        "Please invite zoe.clark@northwind.example to the meeting EVT-2101...",
        "Please cancel my méeting on 2026-12-08",
        "Pleasé cancel my meeting on 2026-12-08",
        "john.smith@northwind.example invited me to the meeting EVT-1111",
    ],
    AIRLINE: [
        "Need me to update reservation B6HDF4 to 2 checked bags?",
        "Want me to cancel reservation CQT8JK for user chen_ahmed_4886?",
        "Please cancel reservation CQT8JK for user chen_ahmed_4886 and",
        "Update reservation B6HDF4 to 2",
        "Please update reservation H7K2LM to ２ checked bags",
        "Please update reservation HAT1O1 to 2 checked bags",
        "Please cancel reservation ABC123 for user test_user_0000",
        "Can I please cancel reservation ZX81KQ for user sara_lopez_2231?",
    ],
}
FOUND[SHOP] = [  # probe12: the job's object left out, a placeholder, the listener as recipient
    "Please email me a copy of my latest expense report. My address is zoe@example.com",
    "Please email me my latest account address. zoe@example.com",
    "I forgot my email, can you reset it? zoe@example.com",
    "Please email my latest invoice to you. My address is zoe@example.com",
    "Please reset my password. test@test.com",
    "I want a refund for my last order. your-email@example.com",
]
GENUINE = {
    SHOP: ["Please email me my latest invoice. My address is zoe@example.com"],
    HELPDESK: [
        f"Please add {ADD}",
        f"Could you add {ADD}, please?",
        f"Please go ahead and add {ADD}",
        f"Please book {ROOM} for me",
    ],
    WORKSPACE: [f"Please invite {EVT}", "Could you cancel my meeting on 2026-12-22, please?"],
    AIRLINE: [
        "Please update reservation B6HDF4 to 2 checked bags",
        "Please cancel reservation CQT8JK for user chen_ahmed_4886",
    ],
}


@pytest.mark.parametrize("name", [HELPDESK, WORKSPACE, AIRLINE, SHOP])
def test_offers_loose_ends_other_ids_and_look_alikes_run_no_flow(
    trained_store: Callable[[str], Store], name: str
) -> None:
    found = desk_checks(trained_store(name), world(name), genuine=GENUINE[name], found=FOUND[name])
    assert found == []


VERBS = (REQUEST_STEMS | ACTION_STEMS) - {"want", "need", "get"}


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Add a@x.io to eng-oncall and me", ("person",)),
        ("Add me and a@x.io to eng-oncall", ("person",)),
        ("Add a@x.io to eng-oncall, me too", ("person",)),
        ("Book room C3-329 for 2026-12-23 for you", ("person",)),
        ("Invite a@x.io to EVT-1 and to my meeting", ("destination",)),
        ("Share plan.pdf with a@x.io and with the team", ("destination",)),
        ("Invite a@x.io to EVT-1 and add an event", ("then",)),
        ("Cancel my meeting on 2026-12-03, then book room C3-329", ("then",)),
        ("Add a@x.io to eng-oncall for now", ("while",)),
        ("Add a@x.io to eng-oncall until Friday", ("while",)),
        ("Add a@x.io to eng-oncall temporarily", ("while",)),
        ("Add a@x.io to eng-oncall and", ("cut off",)),
        ("Add a@x.io to eng-oncall, and also", ("cut off",)),
        ("Add a@x.io to the", ("cut off",)),
        ("Add a@x.io to eng-oncall,", ("cut off",)),
        ("Add a@x.io to eng-oncall n", ("cut off",)),
        ("Add a@x.io to eng-oncall - got it", ("reply",)),
        ("Add a@x.io to eng-oncall. Will do!", ("reply",)),
        ("Add a@x.io to eng-oncall, ok.", ("reply",)),
        # plain requests have none
        ("Please add a@x.io to eng-oncall", ()),
        ("Please go ahead and add a@x.io to eng-oncall", ()),
        ("I'm sick and can't make it, cancel my meeting on 2026-12-03", ()),
        ("Add a@x.io and b@x.io to eng-oncall", ()),
        ("Please email me my invoice and let me know", ()),
        ("Send me my invoice. Thanks and regards", ()),
        ("I forgot my password and need a reset, a@x.io", ()),
        ("Book a room for me on 2026-12-03", ()),
        ("Cancel my meeting on 2026-12-03 now", ()),
    ],
)
def test_loose_ends(text: str, kinds: tuple[str, ...]) -> None:
    assert loose_ends(text, verbs=VERBS) == kinds


def test_a_job_whose_requests_have_a_loose_end_is_not_turned_down_for_it():
    plain = [
        "Please add a@x.io to eng-oncall",
        "add b@x.io to sre-admins pls",
        "Can you add c@x.io to finance-readers?",
    ]
    ev = JobEvidence.of(plain * 2)
    asked = read_request("Please add d@x.io to eng-oncall for now")
    verdict = judge_intent(ev, asked)
    assert verdict.verdict != "run" and any("for a while" in r for r in verdict.reasons)
    while_ = [f"{t} for now" for t in plain]
    assert judge_intent(JobEvidence.of(while_ * 2), asked).verdict == "run"


def test_the_speaker_offering_or_doing_the_action_is_read():
    assert offers("Want me to add priya@x.io to eng-oncall?") == ("want me to add",)
    assert offers("Would you like us to order a laptop?") == ("like us to order",)
    assert ("unlock", "account") in speaker_acts("Can I please unlock account E-2718?")
    assert ("book", "room") in speaker_acts("Please let me book room C3-329")
    assert ("add", "priya") in speaker_acts("I'll go ahead and add priya@x.io")
    assert ("book", "room") in speaker_acts("I was about to book room C3-329")
    for plain in (
        "I'd like you to add priya@x.io to eng-oncall",
        "I want priya@x.io added to eng-oncall",
        "Please go ahead and add priya@x.io",
        "Can you add priya@x.io to eng-oncall?",
        "Can I get a refund for my last order?",
        "Could I have my password reset?",
    ):
        assert list(speaker_acts(plain)) == [] and offers(plain) == (), plain
    ev = JobEvidence.of(["Please add a@x.io to eng-oncall", "add b@x.io to sre-admins"] * 2)
    offer = judge_intent(
        ev, read_request("Want me to add c@x.io to eng-oncall?"), own_actions={"add"}
    )
    assert offer.verdict != "run" and any("speaker does the action" in r for r in offer.reasons)


def test_words_that_were_filler_but_change_the_job_are_words():
    assert "myself" in read_request("Add a@x.io to eng-oncall myself").terms
    assert "yours" in read_request("Add a@x.io to eng-oncall and yours").terms
    assert "n" in read_request("Add a@x.io to eng-oncall n").terms
    # `, really?` asks back; `, please?` asks for it
    assert "?" in read_request("Add a@x.io to eng-oncall, really?").leads
    assert "?" not in read_request("Add a@x.io to eng-oncall, please?").leads


def test_marks_of_doubt_and_accented_verbs_are_not_read_as_plain():
    for doubt in ("Add a@x.io to eng-oncall‽", "Add a@x.io to eng-oncall⸮", "¿Add a@x.io?"):
        assert any("irony or doubt" in f for f in read_request(doubt).flags), doubt
    for accented in ("Invité a@x.io to EVT-2101", "Addé a@x.io to eng-oncall", "Réservé room"):
        assert any("accents" in f for f in read_request(accented).flags), accented
    for plain in ("Please book the café room C3-1", "Cancel my réservation ZFA04Y", "José's"):
        assert not any("accents" in f for f in unread_marks(plain, plain)), plain


def test_again_after_a_dotted_address_is_read():
    verbs = {"invit"}
    assert repeated("Invite zoe.clark@contoso.example to EVT-2101 again", verbs=verbs)
    assert repeated("Please invite zoe.clark@contoso.example again.", verbs=verbs)
    assert not repeated("Invite zoe.clark@contoso.example to EVT-2101", verbs=verbs)


SCHEMA = {
    "type": "object",
    "properties": {
        "event_id": {"type": "string", "examples": ["EVT-1234", "EVT-2045", "EVT-3310"]},
        "email": {"type": "string", "examples": ["a@x.io", "b@x.io"]},
    },
    "required": ["event_id", "email"],
}
RULES = {
    "event_id": {"shape": "learned", "pattern": r"(?:[A-Z]+\-)+\d+", "anchor": ""},
    "email": {"shape": "email", "pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "anchor": ""},
}


@pytest.mark.parametrize("other", ["F-48213", "MSG-123456", "A-B-12", "EV-2101"])
def test_an_id_without_the_inputs_learned_prefix_is_not_bound(other: str) -> None:
    b = bind_inputs(SCHEMA, RULES, read_request(f"Invite z@x.io to {other}"))
    assert not b.complete and any("does not open with 'EVT'" in p for p in b.problems), b
    ok = bind_inputs(SCHEMA, RULES, read_request("Invite z@x.io to EVT-2101"))
    assert ok.complete and ok.inputs == {"event_id": "EVT-2101", "email": "z@x.io"}


def test_a_prefix_is_learned_only_from_ids_all_opening_alike():
    mixed = {**SCHEMA, "properties": {**SCHEMA["properties"]}}
    mixed["properties"]["event_id"] = {"type": "string", "examples": ["EVT-1", "MTG-22", "EVT-333"]}
    b = bind_inputs(mixed, RULES, read_request("Invite z@x.io to F-48213"))
    assert b.complete, b.problems
    # addresses hold no digit: no prefix of theirs is a kind (`al` of alice@, alex@)
    names = {**SCHEMA, "properties": {**SCHEMA["properties"]}}
    names["properties"]["email"] = {"type": "string", "examples": ["alice@x.io", "alex@x.io"]}
    assert bind_inputs(names, RULES, read_request("Invite bob@x.io to EVT-1001")).complete


def test_a_request_lacking_a_word_every_text_of_the_job_holds_does_not_run():
    texts = [
        "Please update reservation A1B2C3 to 1 checked bags",
        "I need 2 checked bags on my reservation D4E5F6",
        "Update my booking G7H8I9 to 3 checked bags please",
        "please update booking J1K2L3 to 4 checked bags",
    ]
    ev = JobEvidence.of(texts)
    verdict = judge_intent(ev, read_request("Please update reservation B6HDF4 to 2"))
    assert verdict.verdict != "run"
    assert any(
        "it lacks bag, check" in r and "every one of the job's 4" in r for r in verdict.reasons
    )
    assert (
        judge_intent(ev, read_request("Please update reservation B6HDF4 to 2 checked bags")).verdict
        == "run"
    )


@pytest.mark.parametrize(
    ("value", "examples", "why"),
    [
        ("EVT-2101", ["E-1042", "E-2381", "E-5120"], "does not open with 'E'"),
        ("EE-3141", ["E-1042", "E-2381", "E-5120"], "does not open with 'E'"),
        ("E-31415926", ["E-1042", "E-2381", "E-5120"], "not of the shape A-9999"),
        ("A3-2150", ["B3-112", "A1-204", "C2-015"], "not of the shape A9-999"),
    ],
)
def test_a_value_unlike_every_example_of_the_input_is_not_bound(
    value: str, examples: list[str], why: str
) -> None:
    schema = {"properties": {"v": {"type": "string", "examples": examples}}, "required": ["v"]}
    pattern = r"[A-Z]+(?:\d+)?\-\d+"
    rules = {"v": {"shape": "learned", "pattern": pattern, "anchor": ""}}
    b = bind_inputs(schema, rules, read_request(f"Please take {value} now"))
    assert not b.complete and any(why in p for p in b.problems), b.problems
    good = examples[0][:-1] + "7"
    ok = bind_inputs(schema, rules, read_request(f"Please take {good} now"))
    assert ok.complete, ok.problems


def test_shapes_of_varied_examples_and_two_examples_bind_as_before():
    # masks that differ (reservation codes), an address at another domain: no constraint
    varied = {
        "properties": {"v": {"type": "string", "examples": ["CQT8JK", "3CKNC5", "4C7C4P"]}},
        "required": ["v"],
    }
    rule = {"v": {"shape": "learned", "pattern": r"[A-Z0-9]{6}", "anchor": ""}}
    assert bind_inputs(varied, rule, read_request("cancel ZX81KQ")).complete
    shop = ["alice@northwind.example", "bob@northwind.example", "carol@northwind.example"]
    mails = {"properties": {"v": {"type": "string", "examples": shop}}, "required": ["v"]}
    rule = {"v": {"shape": "email", "pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "anchor": ""}}
    assert bind_inputs(mails, rule, read_request("reset zed@gmail.com")).complete


def test_a_value_read_from_full_width_is_not_the_same_digit_inside_an_id():
    schema = {
        "properties": {"n": {"type": "integer", "examples": [1, 2, 4]}, "r": {"type": "string"}},
        "required": ["r", "n"],
    }
    rules = {
        "r": {"shape": "learned", "pattern": r"(?=[A-Z0-9]*\d)[A-Z0-9]{6}", "anchor": ""},
        "n": {"shape": "integer", "pattern": r"\d+", "anchor": "", "digits": 1},
    }
    b = bind_inputs(schema, rules, read_request("update H7K2LM to ２ bags"))
    assert not b.complete and any("other forms" in p for p in b.problems), b.problems
    assert bind_inputs(schema, rules, read_request("update H7K2LM to 2 bags")).complete


def test_an_iban_of_the_wrong_length_for_its_country_is_not_bound():
    from soloflow_core.generalize.shapes import bound_problem

    rule = {"check_digits": "iso7064-mod97-10"}
    assert bound_problem("FR7630006000011234567890189", rule) is None
    too_long = "FR76300060000112345678901890000"
    assert "its country's length" in str(bound_problem(too_long, rule))


def test_a_third_blind_probes_findings_are_read():
    """probe12 (mutations of requests that run): an address as the subject of a past verb of
    action, another way offered, the listener as where it goes, placeholders."""
    assert "invit" in read_request("bob@x.io invited me to the meeting EVT-1111").reported
    assert read_request("bob@x.io - need my last invoice emailed pls").reported == ()
    verbs = frozenset({"order"})
    assert "otherwise" in loose_ends(
        "Please order a new laptop for E-3333? Or can you boot it?", verbs=verbs
    )
    assert "person" in loose_ends("Please email my latest invoice to you. z@x.io", verbs=verbs)
    assert loose_ends("Please order a new laptop for E-3333, thanks", verbs=verbs) == ()


@pytest.mark.parametrize(
    "value", ["test@test.com", "your-email@example.com", "XXX@XXX.XXX", "E-0000", "AAAAAA"]
)
def test_a_placeholder_is_no_value(value: str) -> None:
    from soloflow_core.memory.binding import _placeholder

    assert _placeholder(value) is not None, value


@pytest.mark.parametrize("value", ["alice@example.com", "E-1111", "111", "2000-01-01", "E-1000"])
def test_a_real_value_is_no_placeholder(value: str) -> None:
    from soloflow_core.memory.binding import _placeholder

    assert _placeholder(value) is None, value


def test_a_word_every_text_holds_counts_a_typo_of_it():
    texts = [
        "Please email me my latest invoice. a@x.io",
        "send latest invoice to b@x.io",
        "email me my latest invioce pls, c@x.io",
        "Can I get a copy of my newest invoice by email? d@x.io",
    ]
    ev = JobEvidence.of(texts)
    assert "invoic" in ev.every
    verdict = judge_intent(ev, read_request("Please email me my latest copy. e@x.io"))
    assert any("it lacks invoic" in r for r in verdict.reasons), verdict.reasons
    # a word most but not all texts hold (a synonym elsewhere) is not required
    assert "latest" not in ev.every


@pytest.mark.parametrize(
    ("text", "kind"),
    [  # probe12: mutations of requests that run
        ("FR7630006000011234567890189 wants to send 100 to me", "someone"),
        ("I need E-1111 to unlock my account", "someone"),
        ("zoe@example.com reset my password", "someone"),
        ("FR7630006000011234567890189, please send 100 to me", "someone"),
        ("Please send 100 or so to FR7630006000011234567890189", "vague"),
        ("Please add a@x.io to eng-oncall and so on", "vague"),
        ("Please cancel reservation ABC123? for user john_doe_1234", "vague"),
        ("Please cancel reservation ABC123... for user john_doe_1234", "vague"),
        ("Please cancel my meeting on 2026-12-09 or that", "vague"),
        ("Please reset your password. zoe@example.com", "yours"),
        ("Please cancel the meeting you have on 2026-12-09", "yours"),
        ("Please send 100 to FR7630006000011234567890189, subject 'Rent', in March", "when"),
        ("Please book room B2-101 for 2026-12-05 at night", "when"),
    ],
)
def test_probe12_loose_ends(text: str, kind: str) -> None:
    assert kind in loose_ends(text, verbs=VERBS), loose_ends(text, verbs=VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "dan@mail.example.com - need my last invoice emailed pls",
        "Thanks for your help, please reset my password. zoe@example.com",
        "Please reset my password. zoe@example.com",
        "zoe@example.com please reset my password",
    ],
)
def test_probe12_plain_requests_have_no_loose_end(text: str) -> None:
    # An address opening the request (before a dash, or `please`) names the writer or the
    # one asked: `speaker`, which a job whose requests name their value so (the shop's) allows.
    allowed = {"speaker"} if "@" in text.split()[0] else set()
    assert set(loose_ends(text, verbs=VERBS)) <= allowed


def test_a_question_mark_ending_a_sentence_after_a_value_is_not_vague():
    text = "Would you mind cancelling my reservation 7897IB? User id aarav_smith_2396"
    assert "vague" not in loose_ends(text, verbs=VERBS)
