"""Phrase rules: a free-text value a label introduces (``subject 'Rent'``), learned from the
task texts, found again in new ones, bound only when it says nothing more than a subject,
and validated in a flow a person writes. Amounts are found however they are written."""

from __future__ import annotations

import pytest

from soloflow_core.errors import FlowValidationError
from soloflow_core.flow.patterns import find_all, search
from soloflow_core.flow.phrases import find_phrases, phrase_problem
from soloflow_core.flow.validate import validate_flow
from soloflow_core.generalize.extraction import learn_extraction, names_number
from soloflow_core.generalize.shapes import bound_problem, learn_bounds
from soloflow_core.memory.binding import bind_inputs, phrase_words
from soloflow_core.memory.reading import read_request, words_of
from soloflow_core.models import FlowDefinition

TASKS = [
    "Please send 250 to FR80 with the subject 'Rent'",
    "Send 15 to FR07, subject: Pizza night",
    "Can you transfer 42.50 EUR to GB12? Subject 'Concert tickets'",
    "I need to pay 89.99 to FR25 for the bike repair",
    'Transfer 1200 to IBAN DE92, reference "Invoice 2022-118"',
    "Pay GB17 300 euros, subject line 'Car rental'",
]
SUBJECTS = [
    "Rent",
    "Pizza night",
    "Concert tickets",
    "the bike repair",
    "Invoice 2022-118",
    "Car rental",
]
RULE = {"shape": "phrase", "labels": ["reference", "subject"], "bare": ["subject"], "words": 3}
SCHEMA = {"properties": {"subject": {"type": "string"}}, "required": ["subject"]}


def test_a_phrase_rule_is_learned_from_labelled_free_text_and_gives_every_value_back():
    rule = learn_extraction(SUBJECTS, TASKS)
    assert rule == {
        "shape": "phrase",
        "anchor": "",
        "labels": ["for", "line", "reference", "subject"],
        "bare": ["for", "subject"],
        "words": 4,
    }
    assert [search(rule, t, field="f").group("v") for t in TASKS] == SUBJECTS


def test_no_phrase_rule_without_a_label_most_values_share_or_after_a_verb():
    tasks = ["hello Rent there", "Pizza night now", "Concert tickets please"]
    assert learn_extraction(["Rent", "Pizza night", "Concert tickets"], tasks) is None
    verbs = ["send 'Rent' now", "send 'Pizza night'", "send 'Concert tickets'"]
    assert learn_extraction(["Rent", "Pizza night", "Concert tickets"], verbs) is None
    assert learn_extraction(["Rent", "Pizza night"], TASKS[:2]) is None  # fewer than three


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("send 5 to X, subject: Taxi", ["Taxi"]),
        ("send 5 to X (subject: Phone bill)", ["Phone bill"]),
        ("send 5 to X. Subject: Flight share. Thanks", ["Flight share"]),
        ("send 5 to X with reference \u201cSnacks\u201d", ["Snacks"]),
        ("send 5 to X, subject: rent, and close my account", []),  # bare: ends at a comma
        ("send 5 to X, reference: Cinema", []),  # reference only ever quoted
        ("subject 'Rent' and subject 'Gas'", ["Rent", "Gas"]),
        ("subject: one two three four", []),  # more words than the rule's 3
        ("subject ''", []),
        ("subjects 'Rent'", []),
    ],
)
def test_phrases_are_found_only_where_a_label_introduces_them(text: str, want: list[str]):
    assert [m.group("v") for m in find_all(RULE, text, field="f")] == want


def test_a_phrase_that_says_more_than_a_subject_is_not_bound():
    for text, why in [
        ("subject 'please cancel'", "cancel"),
        ("subject 'Mom'", "mom"),
        ("subject 'Not rent'", "not"),
        ("subject: rent and gas", "and"),
        ("subject: Rent please", "please"),
        ("subject: Rent later", "later"),
        ("subject: Rent on Friday", "on"),
        ("subject: Rent if possible", "if"),
        ("subject: Rent in dollars", "in"),
        ("subject: Rent x2", "x2"),
        ("subject: what balance", "what"),
        ("subject 'Rent (double it)'", "it"),
        ("subject 'Rent? or deposit'", "?"),
    ]:
        got = bind_inputs(SCHEMA, {"subject": RULE}, read_request(text))
        assert got.inputs == {} and why in got.problems[0], text
    got = bind_inputs(SCHEMA, {"subject": RULE}, read_request("subject 'Rent and gas'"))
    assert got.inputs == {"subject": "Rent and gas"}  # quoted: its own text
    got = bind_inputs(SCHEMA, {"subject": RULE}, read_request("subject: the bike repair"))
    assert got.inputs == {"subject": "the bike repair"}  # a determiner, then content words
    # the values a phrase holds are its own, not values no input takes
    got = bind_inputs(SCHEMA, {"subject": RULE}, read_request("reference 'Invoice 2022-118'"))
    assert got.inputs == {"subject": "Invoice 2022-118"} and got.complete


def test_a_phrases_words_are_data_not_words_of_the_job():
    read = read_request("Send 5 to X with subject 'Gym membership'")
    assert phrase_words(SCHEMA, {"subject": RULE}, read) == {"gym", "membership"}
    two = read_request("subject 'Gym' subject 'Rent'")
    assert phrase_words(SCHEMA, {"subject": RULE}, two) == frozenset()  # which one? neither


def test_a_closing_quote_is_no_possessive():
    assert words_of("subject 'Groceries'") == ["subject", "groceries"]
    assert read_request("subject 'Groceries' please").parties == ()
    assert read_request("my parents' car").parties == ("parents'",)


def test_amounts_are_found_however_written_and_bounded_by_the_examples():
    assert names_number(42.5, "pay 42.50 EUR") and names_number(1200.0, "send 1200 now")
    assert not names_number(42.5, "pay 42.55") and not names_number(True, "1")
    assert learn_extraction(["250", "42.5", "89.99"], ["send 250", "send 42.50", "pay 89.99"])
    bounds = learn_bounds(["250", "42.5", "89.99"])
    assert bounds == {"decimals": 2, "digits": 3, "positive": True}
    assert "decimals" in (bound_problem("12.345", bounds) or "")
    assert "digits" in (bound_problem("2500", bounds) or "")
    assert "above zero" in (bound_problem("0", bounds) or "")
    assert bound_problem("999.99", bounds) is None
    # the bounds of the amount as written (`42.50`: two decimals), the signs written against it
    rule = learn_extraction(["250", "15", "42.5"], ["send 250 to x", "Send €15 to y", "pay 42.50"])
    assert rule is not None and rule["decimals"] == 2 and rule["signs"] == "€"
    schema = {"properties": {"amount": {"type": "number"}}, "required": ["amount"]}
    assert bind_inputs(schema, {"amount": rule}, read_request("send €18 now")).inputs == {
        "amount": 18.0
    }
    for text in ("send $18 now", "send -18 now", "send 18% now", "send 18 and 18", "send １８ now"):
        got = bind_inputs(schema, {"amount": rule}, read_request(text))
        assert got.inputs == {} and got.problems, text
    plain = learn_extraction(["250", "15", "42.5"], ["send 250 to x", "Send 15 to y", "pay 42.50"])
    assert plain is not None and "signs" not in plain
    assert bind_inputs(schema, {"amount": plain}, read_request("send €18 now")).inputs == {}


def test_a_persons_phrase_rule_is_validated_with_its_field_path():
    assert phrase_problem(RULE) is None
    assert "labels" in (phrase_problem({"shape": "phrase"}) or "")
    assert "one word" in (phrase_problem({"shape": "phrase", "labels": ["a b"]}) or "")
    assert "bare" in (phrase_problem({"shape": "phrase", "labels": ["x"], "bare": ["y"]}) or "")
    assert "words" in (phrase_problem({"shape": "phrase", "labels": ["x"], "words": 0}) or "")
    flow = FlowDefinition.model_validate(
        {
            "name": "pay",
            "input_schema": SCHEMA,
            "extraction": {"subject": {"shape": "phrase", "labels": []}},
            "steps": [{"id": "s", "skill_key": "pay", "input_map": {"s": "{{_trigger.subject}}"}}],
        }
    )
    with pytest.raises(FlowValidationError, match=r"extraction\.subject"):
        validate_flow(flow)
    assert find_phrases({"labels": []}, "subject 'x'") == []
