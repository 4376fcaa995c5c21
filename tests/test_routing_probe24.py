"""probe24, a fifteenth blind probe (``benchmarks/data/probe24_probes.json``), and probe23's
leftovers: a value compared by ``like`` (``… a replacement laptop like employee E-1234
got``), a value that did something after a comma (``…, E-1234 cracked the screen``), an
address after a preposition the job's requests never put before it (``I placed it for
zoe@…``), ``I can make it on <date>``, another thing picked by when it came or asked for anew
(``my latest expense report``, ``a new screen for my laptop``), a choice left open (``… or
the right size``) and the room the speaker is in (``I'm in room B3-112``) ran; each is now
read, on the trained worlds' real stores and agents.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from routing_support import AIRLINE, HELPDESK, SHOP, WORKSPACE, desk_checks, world

from soloflow_core.generalize.extraction import learn_extraction
from soloflow_core.memory.asking import loose_ends
from soloflow_core.memory.evidence import THEN_VERBS, JobEvidence
from soloflow_core.memory.set_aside import set_aside
from soloflow_core.memory.which import offers_choice, recency_picks
from soloflow_core.store import Store

Trained = Callable[[str], Store]
DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "probe24_probes.json"


def _clear(world_name: str) -> list[str]:
    probes = json.loads(DATA.read_text())["probes"]
    return [  # `… for zoe@…` is left: `for` names the account itself as often (HISTORY)
        p["text"]
        for p in probes
        if p["world"] == world_name and not p["debatable"] and " for zoe@" not in p["text"]
    ]


@pytest.mark.parametrize(
    ("text", "compared"),
    [
        ("Please order a replacement laptop for me like employee E-1234 got", True),
        ("I'm sick, like on 2026-12-09. Please cancel my meeting", True),
        ("I'd like to cancel my booking like booking ABC123", True),
        ("I'd like E-1234 unlocked", False),
        ("I would like reservation ABC123 cancelled", False),
        ("We really like room B3-112", False),
    ],
)
def test_like_before_a_value_compares_unless_it_wants(text: str, compared: bool) -> None:
    value = next(v for v in ("E-1234", "2026-12-09", "ABC123", "B3-112") if v in text)
    start = text.rindex(value)
    why = set_aside(text, start, start + len(value), urls=[], labels=frozenset())
    assert (why is not None and "compared by 'like'" in why) is compared, why


def test_an_address_rule_keeps_the_prepositions_before_its_values() -> None:
    values = ["bob@example.org", "carol@example.net", "dan@mail.example.com"]
    refunds = [
        "refund my latest order please, bob@example.org",
        "My email is carol@example.net, refund my last order",
        "Please refund my most recent order - dan@mail.example.com",
    ]
    rule = learn_extraction(values, refunds)
    assert rule is not None and rule["preps"] == []
    text = "Hi, my last order to zoe@example.com was damaged, I'd like a refund"
    start = text.index("zoe@")
    why = set_aside(
        text, start, start + 15, urls=[], labels=frozenset(), preps=frozenset(rule["preps"])
    )
    assert why is not None and "'to'" in why
    sends = [f"send latest invoice to {v}" for v in values]
    rule = learn_extraction(values, sends)
    assert rule is not None and rule["preps"] == ["to"]
    text = "Please send my latest invoice to zoe@example.com"
    start = text.index("zoe@")
    ok = set_aside(
        text, start, start + 15, urls=[], labels=frozenset(), preps=frozenset(rule["preps"])
    )
    assert ok is None
    # a rule learned before `preps` existed checks none
    assert set_aside(text, start, start + 15, urls=[], labels=frozenset()) is None


def test_what_is_picked_by_when_it_came_is_the_jobs_thing() -> None:
    assert recency_picks("Please email me my most recent invoice - x@y.io") == (
        ("recent", ("invoic",)),
    )
    assert recency_picks("I need a replacement laptop for E-1") == (("new", ("laptop",)),)
    job = JobEvidence.of(
        [
            "Please email me my latest invoice. a@x.io",
            "send my most recent invoice to b@x.io",
            "Can I get a copy of my newest invoice by email? c@x.io",
        ]
    )
    assert ("recent", "invoic") in job.recent and job.recent_texts["recent"] == 3
    assert offers_choice("I want a refund or the right size") is True
    assert offers_choice("refund my order, alice.or@example.com") is False


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("My laptop died, E-1234 cracked the screen, I need a replacement laptop", "someone"),
        ("Refund my latest order please, zoe@example.com placed the order", "someone"),
        ("Please book a room for 2026-12-03, I'm in room B3-112", "speaker"),
        ("Please book a room for 2026-12-03. My office is B3-112", "speaker"),
        ("Could you cancel my meeting? I can make it on 2026-12-09", "taken back"),
    ],
)
def test_a_value_that_is_not_the_jobs_is_a_loose_end(text: str, kind: str) -> None:
    assert kind in loose_ends(text, verbs=THEN_VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "Please order a replacement laptop for E-1234, the screen cracked",
        "Please book room B3-112 for 2026-12-03",
        "I can't make it, please cancel my meeting on 2026-12-14",
    ],
)
def test_the_jobs_own_requests_have_no_such_loose_end(text: str) -> None:
    assert not {"someone", "speaker", "taken back"} & set(loose_ends(text, verbs=THEN_VERBS))


@pytest.mark.parametrize(
    ("name", "genuine"),
    [
        (
            SHOP,
            [
                "Please refund my most recent order - zoe@example.com",
                "Please send my latest invoice to zoe@example.com",
                "You can reach me at zoe@example.com, please email me my latest invoice",
            ],
        ),
        (HELPDESK, ["Please order a replacement laptop for employee E-1234"]),
        (AIRLINE, ["I'd like to cancel my booking SL1OQG. My user id: john_doe_1234"]),
        (WORKSPACE, ["Please cancel my meeting on 2027-01-04"]),
    ],
)
def test_probe24_runs_nothing_on_real_agents(
    trained_sqlite: Trained, name: str, genuine: list[str]
) -> None:
    """Every clear harmful request of probe24 in the world runs no flow (the first three go
    through the real agent, which reaches its model); the world's genuine requests still run."""
    w = world(name)
    found = _clear(name.rsplit("_", 1)[-1] if name != SHOP else "shop")
    assert found, name
    ran = desk_checks(trained_sqlite(name), w, genuine=genuine, found=found)
    assert ran == [], ran
