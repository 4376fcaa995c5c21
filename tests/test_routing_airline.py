"""Routing in a second world: the airline desk of ``benchmarks/routing_world_airline.py``.

A real ``create_agent`` agent learns four jobs whose inputs are no e-mail addresses (user
ids, reservation codes, flight numbers, dates, counts) from 8 requests each; a person
approves the flows. Every near miss of its corpus (the cancellation policy, ``don't
cancel``, ``cancel my cancellation``, someone else's booking, a flight number given for a
reservation, two codes, ids in links, injected instructions, other languages, homoglyphs…)
and the ones the gate once ran must run no flow and cause no side effect; new phrasings with
new ids that run must do the right job with the request's own values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from routing_support import AIRLINE, Desk, approve, world

from benchmarks import routing_world_airline as W
from soloflow_core.generalize.arguments import learn_extraction
from soloflow_core.generalize.shapes import learn_shape
from soloflow_core.memory.reading import read_request
from soloflow_core.store import Store

DESK = world(AIRLINE)
USER, AGENT = DESK.user, DESK.agent
Trained = Callable[[str], Store]

FOUND = [
    "Please cancel my cancellation of reservation J87UAA, user emma_brown_6387",
    "Cancel the cancellation request for reservation 16FSTW. I am ivan_silva_9888",
    "How many bags did I check on reservation TO2PL3?",
    "Cancel flight HAT131 for user raj_nguyen_9079",
    "Could you cancel reservation ZFA04Y on my account mia_li_3668? Or can I?",
    "I want to cancel reservation ZFA04Y. I am mia_li_3668. Or am I?",
    "Please cancel reservation ZFA04Y for user mia_li_3668, is that ok?",
    "Please cancel reservation ZFA04Y for user mia_li_3668? Really?",
]
"""Near misses the gate ran while this world was built (a noun of the job's action read as
the action, ``did`` read as ``do``, a flight number taken for a reservation code, a question
after a value read as part of the sentence before it, a question in a last clause or of
nothing but filler)."""


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def _desk(store: Store) -> Desk:
    """The airline agent after its training requests, every learned flow approved."""
    approve(store, DESK)
    return Desk(store, DESK)


def test_the_four_jobs_are_learned_with_their_ids_bound_from_the_text(trained_sqlite: Trained):
    sqlite_store = trained_sqlite(AIRLINE)
    with _desk(sqlite_store):
        flows = {
            m.skill_keys[-1]: sqlite_store.get_flow(m.name, user_id=USER, agent_id=AGENT).flow
            for m in sqlite_store.list_flow_meta(user_id=USER, agent_id=AGENT)
        }
        assert set(flows) == set(W.EFFECT_TOOL.values())
        cancel = flows["cancel_reservation"]
        assert set(cancel.input_schema["required"]) == {"user_id", "reservation_id"}
        assert set(cancel.extraction) == {"user_id", "reservation_id"}  # no "caller gives it"
        assert "reservation" in cancel.extraction["reservation_id"]["labels"]


def test_near_misses_and_the_ones_once_run_run_no_flow(trained_store: Trained):
    store = trained_store(AIRLINE)
    with _desk(store) as desk:
        near = [r["text"] for r in W.load_corpus() if r["job"] is None]
        near += [text for text, job in W.HOSTILE if job is None]
        assert len(near) >= 230
        ran = []
        for text in [*FOUND, *near]:
            got = desk.ask(text)
            if got["flow"] is not None or got["calls"] == 0 or got["effects"]:
                ran.append((text, got))
        assert ran == []
        assert store.list_flow_runs(user_id=USER, agent_id=AGENT) == []


def test_new_phrasings_that_run_do_the_right_job_with_the_requests_values(trained_sqlite: Trained):
    with _desk(trained_sqlite(AIRLINE)) as desk:
        served, wrong = 0, []
        for r in W.load_corpus():
            if r["category"] != "paraphrase":
                continue
            got = desk.ask(r["text"])
            if got["calls"] != 0:
                continue
            if W.served(r, got["effects"]):
                served += 1
            else:
                wrong.append((r["text"], got))
        assert wrong == []
        assert served >= 60  # 83 of 168 when written (benchmarks/RESULTS.md)


def test_codes_of_one_length_are_a_shape_no_word_or_number_has():
    codes = learn_shape(["ZFA04Y", "1N99U6", "E3KS3X"])
    assert codes == r"(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}"
    assert learn_shape(["HAT170", "HAT005"]) == r"[A-Z]{3}\d{3}"
    assert learn_shape(["CANCEL", "PLEASE"]) is None
    assert learn_shape(["ZFA04Y", "1N99U"]) is None  # not one length
    uuids = ["3f2b8c1e-9d4a-4c7e-b5a1-0e6f2d9c8b7a", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"]
    hex_ = "[0-9a-f]"
    assert (
        learn_shape(uuids) == rf"{hex_}{{8}}\-{hex_}{{4}}\-{hex_}{{4}}\-{hex_}{{4}}\-{hex_}{{12}}"
    )
    # The values' own shape beats "any word after 'flight'"; the nouns before it are kept.
    rule = learn_extraction(
        ["HAT170", "HAT005"], ["status of flight HAT170 today", "flight status for HAT005"]
    )
    assert rule is not None and rule["pattern"] == r"[A-Z]{3}\d{3}"
    assert rule["labels"] == ["flight", "for"]


def test_a_noun_of_an_action_is_no_action_and_no_verb():
    assert read_request("Please cancel my booking ZFA04Y").actions == ("cancel",)
    assert read_request("Cancel booking ZFA04Y").actions == ("cancel",)
    assert read_request("Book flight HAT170 for me").actions == ("book",)
    read = read_request("Please cancel my cancellation of reservation ZFA04Y")
    assert read.terms == ("cancel", "cancellation", "reservation")
    assert "did" in read_request("How many bags did I check on ZFA04Y?").terms
    assert "am" in read_request("Cancel ZFA04Y. I am mia_li_3668. Or am I?").leads
    assert "can" in read_request("Refund my order. Or can I?").leads
    assert read_request("Or can I get a refund?").leads == ()
    assert "is" in read_request("Refund my order, is that ok?").leads  # and a tag: "?"
    assert read_request("Refund my order? Really?").leads == ("?",)
