"""Values the gate could not bind, bound: two numbers of one shape told apart by the words
that introduce them (``Change scheduled transaction 15 to 45``: the id after
``transaction``, the amount after ``to``), and file names (``Share design-spec.pdf with
…``), which are values, not the job's words. Through real ``create_agent`` agents on both
stores, with the near misses each new binding could let through: a second id or amount, a
number no label introduces, an id of 0, another extension, a file inside a link or a path.
A seventh blind probe (probe16) of these bindings found a unit, a count or a time after the
number taken for the amount (``to 50 %``, ``2.5 m``, ``9 am``, ``3 payments``; the payment's
amount had the same holes), ``to #8``, ``should it be 55?`` and the file's owner as its
recipient (``share roadmap.pdf of X with me``): a number rule now keeps the words its
values were followed by (``after``), ``#`` is a sign learned like ``€``, asking whether a
value should be so and ``with me`` are loose ends. An eighth (probe17) found ``today`` read
as filler (reverted) and ``my accountant bob@…`` stemmed into ``account`` (a word for a
person is kept whole). And the request reader finds values in
linear time (an address is looked for from its start: ``a.a.a.…`` took 15 s for 40,000
characters)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from routing_support import BANK, SHOP, WORKSPACE, Desk, approve, desk_checks, world

from soloflow_core.errors import FlowValidationError
from soloflow_core.flow.patterns import find_all, label_before
from soloflow_core.flow.validate import validate_flow
from soloflow_core.generalize.extraction import extract_value, learn_extraction
from soloflow_core.generalize.shapes import learn_shape, unit_after
from soloflow_core.memory.asking import loose_ends
from soloflow_core.memory.reading import read_request
from soloflow_core.models.flows import FlowDefinition
from soloflow_core.store import Store

AISHA, LI = "aisha.khan@northwind.example", "li.wang@northwind.example"
UPDATES = [
    "Please change scheduled transaction 7 to 1200",
    "Update my standing order 2: the amount should be 55 from now on",
    "Can you set the amount of scheduled payment 9 to 950?",
    "Change the amount of my scheduled transaction 29 to €89.99",
    "I need scheduled transaction #31 updated to 1100 EUR",
    "Please update the rent payment (scheduled transaction 11) to 30",
    "Set scheduled transfer 3 to 2200 please",
    "Increase my standing order 8 to 19.99",
]
IDS = ["7", "2", "9", "29", "31", "11", "3", "8"]
AMOUNTS = ["1200", "55", "950", "89.99", "1100", "30", "2200", "19.99"]


def test_two_numbers_of_one_shape_are_told_apart_by_the_words_before_them() -> None:
    id_rule = learn_extraction(IDS, UPDATES)
    amount_rule = learn_extraction(AMOUNTS, UPDATES)
    assert id_rule is not None and amount_rule is not None
    assert id_rule["labelled"] is True
    assert id_rule["labels"] == ["order", "payment", "transaction", "transfer"]
    assert amount_rule["labelled"] is True and amount_rule["labels"] == ["be", "to"]
    assert amount_rule["signs"] == "€"
    text = "Change scheduled transaction 15 to 45 please"
    assert (extract_value(id_rule, text), extract_value(amount_rule, text)) == ("15", "45")
    # a tool's float (1200.0) is found however the task wrote it (1200)
    floats = [str(float(a)) for a in AMOUNTS]
    assert learn_extraction(floats, UPDATES) == amount_rule


def test_no_labelled_rule_when_the_labels_do_not_tell_the_numbers_apart() -> None:
    told = ["move 7 to 12", "put 9 at 30", "move 4 to 8"]
    assert learn_extraction(["12", "30", "8"], told) is not None
    tasks = ["move 7 to 12 and to 13", "put 9 at 30", "move 4 to 8"]  # 13 after `to` too
    assert learn_extraction(["12", "30", "8"], tasks) is None
    # a value no word introduces: no label to tell it by
    assert learn_extraction(["12", "30"], ["7, 12", "9, 30"]) is None


def test_the_word_that_introduces_a_value_skips_signs_quotes_and_marks() -> None:
    text = "transaction #31 to €89.99 (order 'x7') and 4"
    assert label_before(text, text.index("31")) == "transaction"
    assert label_before(text, text.index("89")) == "to"
    assert label_before(text, text.index("x7")) == "order"
    assert label_before(text, text.index("4")) == "and"
    assert label_before("12", 0) == ""
    rule = {"pattern": r"\d+", "anchor": "", "labelled": True, "labels": ["transaction"]}
    found = find_all(rule, "transactions 4 and 5, transaction 6", field="f")
    assert [m.group("v") for m in found] == ["4", "6"]  # a plural label is the label


@pytest.mark.parametrize(
    ("labelled", "labels", "bad"),
    [
        (True, ["to"], False),
        ("yes", ["to"], True),
        (True, [], True),
        (True, None, True),
        (True, ["to", ""], True),
    ],
)
def test_a_labelled_rule_needs_its_labels(labelled: Any, labels: Any, bad: bool) -> None:
    rule: dict[str, Any] = {"shape": "number", "pattern": r"\d+", "anchor": ""}
    rule["labelled"] = labelled
    if labels is not None:
        rule["labels"] = labels
    flow = FlowDefinition.model_validate(
        {
            "name": "f",
            "steps": [{"id": "a", "skill_key": "t", "input_map": {"x": "{{_trigger.x}}"}}],
            "extraction": {"x": rule},
        }
    )
    if not bad:
        validate_flow(flow)
        return
    with pytest.raises(FlowValidationError, match=r"extraction\.x\.labelled|extraction\.x\.labels"):
        validate_flow(flow)


def test_file_names_have_a_shape_and_are_values() -> None:
    shape = learn_shape(["Q3-report.xlsx", "roadmap.pdf", "onboarding-guide.docx"])
    assert shape is not None
    rule = {"pattern": shape, "anchor": ""}
    for text, found in [
        ("share notes.csv with x", "notes.csv"),
        ("share roadmap.pdf.", "roadmap.pdf"),
        ("share DESIGN.PDF now", "DESIGN.PDF"),
        ("visit example.com", None),
        ("share roadmap.pdf.exe", None),
        ("mail a.b@roadmap.pdf", None),
    ]:
        assert extract_value(rule, text) == found, text
    # an uncommon extension among the examples: only the examples' own extensions
    odd = {"pattern": learn_shape(["build-1.exe", "Q3-report.xlsx"]), "anchor": ""}
    assert extract_value(odd, "run setup.exe") == "setup.exe"
    assert extract_value(odd, "share notes.csv") is None
    read = read_request("please share design-spec.pdf with omar@contoso.example")
    assert read.values == ("design-spec.pdf", "omar@contoso.example")
    assert "design" not in read.terms and "spec" not in read.terms
    assert read_request("the pdf format, example.com").values == ()


@pytest.mark.parametrize(
    ("after", "bad"),
    [
        (" to X", False),
        (" please", False),
        (" EUR", False),
        (" changed to 5", False),
        (" sent to X", False),
        ("?", False),
        ("", False),
        (" %", True),
        (" m", True),
        (" am", True),
        (" / m", True),
        (" payments", True),
        (" EUR m", True),
        (" times", True),
    ],
)
def test_a_unit_or_count_after_a_number_sets_it_aside(after: str, bad: bool) -> None:
    rule = {"shape": "number", "after": ["eur", "please"]}
    assert (unit_after("to 55" + after, 5, rule) is not None) is bad


@pytest.mark.parametrize(
    ("after", "bad"),
    [(" %", True), (" m", True), (" am", True), (" days", True), (" bags", False), (" to", False)],
)
def test_a_rule_learned_before_after_words_sets_aside_plain_units_only(
    after: str, bad: bool
) -> None:
    assert (unit_after("to 55" + after, 5, {"shape": "number"}) is not None) is bad


def test_a_number_rule_learns_the_words_after_its_values() -> None:
    rule = learn_extraction(AMOUNTS, UPDATES)
    assert rule is not None and rule["after"] == ["eur", "from", "please"]
    assert learn_extraction(["2", "3"], ["add 2 bags to X", "add 3 checked bags"])["after"] == [
        "bags",
        "checked",
    ]


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Update my standing order 2: should it be 55?", True),
        ("Update my standing order 2: can the amount be 55?", True),
        ("Update my standing order 2: the amount should be 55?", True),
        ("Can you set the amount of scheduled payment 9 to 950?", False),
        ("Update my standing order 2: the amount should be 55 from now on", False),
    ],
)
def test_asking_whether_a_value_should_be_so_is_a_loose_end(text: str, asks: bool) -> None:
    assert ("whether" in loose_ends(text, verbs=frozenset({"updat", "set"}))) is asks


@pytest.mark.parametrize("text", ["a." * 20_000, "a-" * 20_000, "a.b@" * 10_000, "x.pdf." * 8000])
def test_values_are_read_in_linear_time(text: str) -> None:
    start = time.process_time()
    read_request(text)
    assert time.process_time() - start < 3.0  # was 15 s for "a." * 20,000


UPDATE_RUNS = [
    ("Please change scheduled transaction 40 to 1300", {"id": 40, "amount": 1300}),
    ("Change scheduled transaction 15 to 45 please", {"id": 15, "amount": 45}),
    ("I'd like scheduled payment 9 changed to 99.50", {"id": 9, "amount": 99.5}),
    ("I want scheduled transaction 26 to be 900", {"id": 26, "amount": 900}),
    ("Please update scheduled transaction #21 to €1250", {"id": 21, "amount": 1250}),
    ("I need scheduled payment 12 changed to 85 EUR", {"id": 12, "amount": 85}),
]
UPDATE_NEAR_MISSES = [
    "Change scheduled transaction 0 to 1200",  # no id is 0
    "Change scheduled transaction 15 and 16 to 45",  # a second id
    "Change scheduled transaction 15 from 30 to 45 please",  # a second amount
    "Please change scheduled transaction 7 to 1200 and 8 to 300",
    "Please change scheduled transaction 7 to 1200? or to 1300?",
    "Please change scheduled transaction 1200 to 7",
    "Please change scheduled transaction 7 by 1200",  # no label introduces the amount
    "Update scheduled transaction 14, amount 410",
    "Please change scheduled transaction 7 to -1200",
    "Please change scheduled transaction 7 to 99999999",
    "Please change scheduled transaction 7 to 1200%",
    "Please change the date of scheduled transaction 7 to 12",
    "Please change scheduled transaction 7 to the 12th",
    "Please change scheduled transaction 7 to 1200 from transaction 8",
    "Please change my scheduled transaction to 1200",
    "Don't change scheduled transaction 7 to 1200",
    "Please send 1200 to scheduled transaction 7",
    # probe16: a unit, a count or a time after the number; `#8`; a question; a scope
    "Change scheduled transaction 7 to 3 payments",
    "Change scheduled transaction 7 to 3 standing orders",
    "Change scheduled transaction 7 to 50 % of the amount",
    "I need scheduled transaction #31 updated to 5 % EUR",
    "Please change scheduled transaction 7 to 2 M EUR",
    "Can you set the amount of scheduled payment 9 to 950 m?",
    "I need scheduled transaction #31 updated to 1100 EUR m",
    "Please change scheduled transaction 7 to 9 am",
    "Please update my standing order 2 to 30 d",
    "Please update my standing order 2 to 55 / m",
    "Please update my standing order 2 to 55 for 2 payments",
    "Change scheduled transaction 7 to #8",
    "Update my standing order 2: should it be 55?",
    "Update my standing order 2: can the amount be 55?",
    "Please update my standing order 2: the amount should be 55?",
]
SEND_NEAR_MISSES = [  # the same holes in the payment's amount, learned with the same words
    "Please send 25 % to FR8011066580351737459081366 with the subject 'Rent'",
    "Please send 2.5 m to FR8011066580351737459081366 with the subject 'Rent'",
    "Please send 1 M to FR8011066580351737459081366 with the subject 'Rent'",
    "Please send 3 m EUR to FR8011066580351737459081366 with the subject 'Rent'",
]
SHARE_RUNS = [
    ("please share design-spec.pdf with omar.haddad@contoso.example", "design-spec.pdf"),
    ("Can you share contract-v2.docx with kenji.sato@contoso.example?", "contract-v2.docx"),
    ("Would you share travel-policy.pdf with nina.berger@contoso.example?", "travel-policy.pdf"),
    ("Please share roadmap.pdf with zoe@contoso.example.", "roadmap.pdf"),
]
SHARE_NEAR_MISSES = [
    "Please share roadmap.pdf.exe with zoe@contoso.example",
    "Please share roadmap.pdf and budget.xlsx with zoe@contoso.example",
    "Don't share roadmap.pdf with zoe@contoso.example",
    "Please unshare roadmap.pdf with zoe@contoso.example",
    "Please share roadmap.pdf with zoe@contoso.example and tom@contoso.example",
    "Please share https://drive.example/roadmap.pdf with zoe@contoso.example",
    "Please share C:/docs/roadmap.pdf with zoe@contoso.example",
    "Please share roadmap.pdf from tom@contoso.example with zoe@contoso.example",
    "Please share roadmap.pdf with everyone",
    "Share roadmap.pdf with zoe@contoso.example as editor",
    "Please stop sharing roadmap.pdf with zoe@contoso.example",
    "Who has access to roadmap.pdf? zoe@contoso.example",
    "Share roadmap.pdf with zoe@contoso.example? No wait.",
    "Please rename roadmap.pdf to zoe@contoso.example",
    "Please share roadmap.pdf.",
    # probe16: the address is the file's owner or sharer; the speaker receives
    "Please share the file roadmap.pdf of tom.baker@northwind.example with me",
    "Could you share the file roadmap.pdf tom.baker@northwind.example shared with me",
    "Could you share the file roadmap.pdf maria.lopez@northwind.example can access with me",
    "Can you share the file roadmap.pdf with me, tom.baker@northwind.example?",
    "Please share the file roadmap.pdf with you, tom.baker@northwind.example",
    "Please share the file tom.baker@northwind.example shared with roadmap.pdf",
    "Please share with roadmap.pdf the file tom.baker@northwind.example",
]


def _served(
    store: Store, name: str, runs: list[tuple[str, Any]], misses: list[str]
) -> list[dict[str, Any]]:
    """Each of ``runs`` routes to a flow with its inputs; none of ``misses`` does; the first
    run goes through the agent with no model call. Returns that run's side effects."""
    w = world(name)
    approve(store, w)
    w.module.EFFECTS.clear()
    try:
        with Desk(store, w) as desk:
            for text, want in runs:
                d = desk.mw.route(text)
                assert d.run is not None, (text, [c.reasons for c in d.checks])
                if isinstance(want, dict):
                    assert d.inputs == want, (text, d.inputs)
                else:
                    assert want in d.inputs.values(), (text, d.inputs)
            ran = [t for t in misses if desk.mw.route(t).run is not None]
            assert ran == []
            for text in misses[:2]:
                got = desk.ask(text)
                assert got["flow"] is None and got["calls"] > 0 and not got["effects"], text
            got = desk.ask(runs[0][0])
            assert got["calls"] == 0 and got["flow"] is not None
            return [e for e in got["effects"] if e["side_effects"]]
    finally:
        w.module.EFFECTS.clear()


def test_a_standing_orders_id_and_amount_are_bound_from_their_labels(
    trained_store: Callable[[str], Store],
) -> None:
    misses = UPDATE_NEAR_MISSES + SEND_NEAR_MISSES
    effects = _served(trained_store(BANK), BANK, UPDATE_RUNS, misses)
    assert effects == [
        {
            "tool": "update_scheduled_transaction",
            "args": {"id": 40, "amount": 1300},
            "side_effects": True,
        }
    ]


def test_a_file_name_is_bound_and_shared(trained_store: Callable[[str], Store]) -> None:
    effects = _served(trained_store(WORKSPACE), WORKSPACE, SHARE_RUNS, SHARE_NEAR_MISSES)
    assert [e["tool"] for e in effects] == ["share_file"]
    assert effects[0]["args"]["email"] == "omar.haddad@contoso.example"


def test_help_me_asks_and_today_stays_a_word() -> None:
    read = read_request("Can you help me cancel reservation DI902J? I'm ivan_brown_2590")
    assert read.asking and read.terms == ("cancel", "reservation")
    assert read_request("help me understand my invoice").terms == ("understand", "invoic")
    # `today` as filler ran `cancel my meeting on … and my meeting today` (probe17)
    assert "today" in read_request("the status of flight HAT154 today").terms
    # `currently` is no filler: `How many bags are currently on…` asks no allowance
    assert "current" in read_request("How many bags are currently on G0ZP7N?").terms


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I want a refund for my last order, and my latest. alice.m@example.com", "another"),
        ("Refund my last order and my latest invoice", "another"),
        ("Forward the last email address from a@x.io to b@x.io", "address"),
    ],
)
def test_probe13_leftovers_another_thing_or_an_address(text: str, kind: str) -> None:
    assert kind in loose_ends(text, verbs=frozenset({"refund", "forward"}))


@pytest.mark.parametrize(
    "text",
    [
        "I want a refund for my last order. alice.m@example.com",
        "Forward the last email from a@x.io to b@x.io",
        "forward the last email from my email address a@x.io to b@x.io",
    ],
)
def test_one_thing_and_a_message_are_no_such_loose_end(text: str) -> None:
    found = loose_ends(text, verbs=frozenset({"refund", "forward"}))
    assert "another" not in found and "address" not in found


@pytest.mark.parametrize(
    ("name", "genuine", "found"),
    [
        (
            SHOP,
            "I want a refund for my last order. alice.m@example.com",
            "I want a refund for my last order, and my latest. alice.m@example.com",
        ),
        (
            WORKSPACE,
            f"Forward the last email from {AISHA} to {LI}",
            f"Forward the last email address from {AISHA} to {LI}",
        ),
    ],
)
def test_probe13_leftovers_run_no_flow(
    trained_store: Callable[[str], Store], name: str, genuine: str, found: str
) -> None:
    assert desk_checks(trained_store(name), world(name), genuine=[genuine], found=[found]) == []


PROBE17 = {  # an eighth blind probe: `today` read as filler, an accountant read as an account
    WORKSPACE: [
        "Please cancel my meeting on 2026-12-03 and my meeting today",
        "Please cancel my meeting on 2026-12-03 or today",
        "Please share Q3-report.xlsx with maria.lopez@northwind.example just today",
    ],
    SHOP: [
        "Please email my latest invoice to my accountant bob@example.org",
        "Please reset the password of my accountant alice@example.com",
        "Please email my latest invoice to accounts: bob@example.org",
        "send my latest invoice to accounting: bob@example.org",
        "Please refund my last order into the account of bob@example.org",
        "Please refund my order from today or my last order. alice@example.com",
    ],
    BANK: [
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent' from today on",
        "Show me my transactions from 2022-03-28 to today",
    ],
}
GENUINE17 = {
    WORKSPACE: "Please cancel my meeting on 2026-12-03",
    SHOP: "Please email my latest invoice to bob@example.org",
    BANK: "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'",
}


@pytest.mark.parametrize("name", [WORKSPACE, SHOP, BANK])
def test_probe17_today_and_an_accountant_run_no_flow(
    trained_store: Callable[[str], Store], name: str
) -> None:
    found = desk_checks(
        trained_store(name), world(name), genuine=[GENUINE17[name]], found=PROBE17[name]
    )
    assert found == []


def test_a_word_for_a_person_is_kept_whole_not_stemmed_into_a_job_word() -> None:
    read = read_request("Please email my latest invoice to my accountant bob@example.org")
    assert "accountant" in read.terms and "account" not in read.terms
    assert "accounting" in read_request("send it to accounting: bob@example.org").terms
