"""Near misses the hostile review left running as "grey", through real ``create_agent``
agents on both stores: counts outside the bounds learned from the examples (``999`` bags,
``007``, ``3.0``), impossible dates (``2024-02-30``), ``-ing`` openers that narrate
(``Cancelling reservation …``), a flight number bound as a reservation code (``HAT170``), and
the job's action done to the user (``cancel user … for reservation …``). Every line of
``benchmarks/data/greyfix_probes_*.txt`` (comments aside) is such a near miss; the same jobs
with values inside the learned bounds still run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from routing_support import AIRLINE, SHOP, WORLDS, Desk, approve, world

from soloflow_core.generalize.arguments import learn_extraction
from soloflow_core.generalize.shapes import bound_problem, learn_bounds
from soloflow_core.memory.binding import ValueKind, value_kinds
from soloflow_core.memory.intent import JobEvidence, judge_intent
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
PROBES = {
    AIRLINE: DATA / "greyfix_probes_airline.txt",
    SHOP: DATA / "greyfix_probes_shop.txt",
}
STILL_RUN = {
    AIRLINE: [
        # values inside what was learned: a count of one digit, a real date, a code of the
        # reservation shape that is no flight number (only its shape, not its HAT)
        ("Please update reservation B6HDF4 to 2 checked bags", {"total_baggages": 2}),
        ("Please set 9 checked bags for my reservation U9OVSK", {"total_baggages": 9}),
        ("Please update reservation B6HDF4 to 0 checked bags", {"total_baggages": 0}),
        ("What is the status of flight HAT066 on 2024-02-29?", {"date": "2024-02-29"}),
        ("Please check the status of flight HAT119 on 2024-12-31", {"date": "2024-12-31"}),
        ("Please cancel reservation KYR131 for user mia_li_3668", {"reservation_id": "KYR131"}),
        ("Would you mind cancelling my reservation 7897IB? User id aarav_smith_2396", {}),
    ],
    SHOP: [
        ("Please reset the password for dave@example.com", {"email": "dave@example.com"}),
    ],
}


def _probes(world: str) -> list[str]:
    lines = PROBES[world].read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("##")]


@pytest.mark.parametrize("name", WORLDS)
def test_grey_near_misses_run_no_flow_and_values_inside_the_bounds_still_run(
    trained_store: Callable[[str], Store], name: str
) -> None:
    w = world(name)
    store = trained_store(name)
    approve(store, w)
    w.module.EFFECTS.clear()
    try:
        with Desk(store, w) as desk:
            probes = _probes(name)
            assert len(probes) >= 20
            ran = []
            for text in probes:
                got = desk.ask(text)
                if got["flow"] is not None or got["calls"] == 0 or got["effects"]:
                    ran.append(text)
            assert ran == []
            for text, inputs in STILL_RUN[name]:
                decision = desk.mw.route(text)
                assert decision.run is not None, (text, [c.reasons for c in decision.checks])
                assert inputs.items() <= decision.inputs.items(), (text, decision.inputs)
                got = desk.ask(text)
                assert got["calls"] == 0 and len(got["effects"]) == 1, text
    finally:
        w.module.EFFECTS.clear()


def test_bounds_are_learned_from_the_examples():
    assert learn_bounds(["1", "4", "2"]) == {"digits": 1}
    assert learn_bounds(["12", "7"]) == {"digits": 2}
    assert learn_bounds(["007", "123"]) == {"digits": 3, "padded": True}
    assert learn_bounds(["2024-05-24", "2024-05-03"]) == {"date_format": "%Y-%m-%d"}
    assert learn_bounds(["24.05.2024", "03.05.2024"]) == {"date_format": "%d.%m.%Y"}
    assert learn_bounds(["ZFA04Y", "HAT170"]) == {}
    rule = learn_extraction(["2", "1"], ["Update booking PY7FF2 to 2 bags", "Set to 1 bag"])
    assert rule is not None and rule["digits"] == 1


@pytest.mark.parametrize(
    ("value", "bad"),
    [("999", True), ("12", True), ("07", True), ("00", True), ("9", False), ("0", False)],
)
def test_a_count_outside_the_learned_digits_is_set_aside(value: str, bad: bool):
    assert (bound_problem(value, {"digits": 1}) is not None) is bad


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("2024-13-45", True),
        ("2024-02-30", True),
        ("2023-02-29", True),
        ("2024-04-31", True),
        ("2024-00-10", True),
        ("2024-5-3", True),
        ("2024-02-29", False),
        ("1999-12-31", False),
    ],
)
def test_a_date_that_is_no_real_date_in_the_examples_form_is_set_aside(value: str, bad: bool):
    assert (bound_problem(value, {"date_format": "%Y-%m-%d"}) is not None) is bad


def test_an_ing_opener_in_a_sentence_asking_nothing_narrates():
    assert read_request("Cancelling reservation ZFA04Y for user mia_li_3668").narrated == (
        "cancel",
    )
    assert read_request("Hi, refunding my latest order, a@x.io").narrated == ("refund",)
    assert read_request("Re: Resetting my password for a@x.io").narrated == ("reset",)
    assert read_request("Now checking my baggage allowance for ZFA04Y").narrated == ("check",)
    # asked for, it is a request; an -ing that is no verb of request or action narrates nothing
    assert read_request("Would you mind cancelling my reservation ZFA04Y?").narrated == ()
    assert read_request("Please help me with cancelling reservation ZFA04Y").narrated == ()
    assert read_request("Regarding reservation ZFA04Y: cancel it").narrated == ()
    evidence = JobEvidence.of(["Please cancel reservation ZFA04Y"] * 4)
    verdict = judge_intent(evidence, read_request("Cancelling reservation ZFA04Y"))
    assert verdict.verdict != "run" and any("narrates" in r for r in verdict.reasons)


def test_the_action_done_to_a_word_the_job_never_acts_on_vetoes():
    texts = [
        "Please cancel reservation CQT8JK for user chen_ahmed_4886",
        "Cancel booking 4C7C4P, my user id is omar_ahmed_5129",
        "Please cancel my reservation V2QPAF, user aarav_khan_8986",
        "Cancel my reservation 6I3PS6, user liam_patel_5365",
    ]
    evidence = JobEvidence.of(texts)
    assert evidence.targets == {"reservation": 3, "book": 1}  # stems
    assert read_request("Please cancel user mia_li_3668 for reservation ZFA04Y").targets == (
        "user",
    )
    bad = judge_intent(evidence, read_request("Please cancel user mia_li_3668, booking ZFA04Y"))
    assert any("never act on" in r for r in bad.reasons)
    good = judge_intent(evidence, read_request("Please cancel booking ZFA04Y for user mia_li_3"))
    assert not any("never act on" in r for r in good.reasons)


def test_a_value_of_a_narrower_kind_with_its_letters_is_another_kind():
    schema = {
        "properties": {
            "reservation_id": {"examples": ["CQT8JK", "3CKNC5", "4C7C4P"]},
            "flight_number": {"examples": ["HAT066", "HAT119", "HAT182"]},
        }
    }
    extraction = {
        "reservation_id": {"pattern": r"(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}"},
        "flight_number": {"pattern": r"[A-Z]{3}\d{3}"},
    }
    kinds = value_kinds([(schema, extraction)])
    assert {k.name for k in kinds} == {"reservation_id", "flight_number"}
    flight = next(k for k in kinds if k.name == "flight_number")
    assert flight.prefix == "HAT"
    assert ValueKind("x", "[A-Z]{2}", ("AB", "CD")).prefix == ""
