"""A tenth blind probe (probe19, ``benchmarks/data/probe19_probes.json``) of the warm and cold
stores: a request followed by a sentence that takes it back or says it is done (``… I
remember it now``, ``… It's paid.``, ``… It boots again.``, ``… I'll be there.``, ``… I can
travel now.``), and ``add 2 checked bags`` read as a total of two. Each is a loose end
(:func:`~soloflow_core.memory.asking.loose_ends`, ``taken back``) or a change of a quantity
(:func:`~soloflow_core.memory.forms.changed_by`); the requests they end stay the job.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from routing_support import (
    AIRLINE,
    BANK,
    HELPDESK,
    SHOP,
    WORKSPACE,
    Desk,
    World,
    approve,
    desk_checks,
    world,
)

from soloflow_core.memory.asking import loose_ends
from soloflow_core.memory.evidence import THEN_VERBS
from soloflow_core.memory.forms import changed_by
from soloflow_core.store import Store

Trained = Callable[[str], Store]


@pytest.mark.parametrize(
    "text",
    [
        "Please reset my password. alice@example.com. I remember it now.",
        "Please reset my password. alice@example.com. I remember the old one now.",
        "Please reset my password. alice@example.com. Remembered it.",
        "reset password bob@example.org - I remember it now",
        "Please reset my password. alice@example.com. I can log in again now.",
        "Please reset my password. alice@example.com. I'm in again.",
        "Please reset my password. alice@example.com. I'm logged in.",
        "Please refund my most recent order - dan@example.com. It's refunded.",
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. It's paid.",
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. I've paid it.",
        "Please order a replacement laptop for employee E-2290. It boots again.",
        "Please order a replacement laptop for employee E-2290. It's on again.",
        "Please order a replacement laptop for employee E-2290. It's been ordered.",
        "Please cancel my meeting on 2026-12-03. I'll be there.",
        "Please cancel my meeting on 2026-12-03. I'll make it.",
        "Please cancel my meeting on 2026-12-03. I can be there.",
        "Please cancel my meeting on 2026-12-03. I will be in.",
        "Please cancel reservation CQT8JK for user chen_ahmed_4886. I can travel now.",
        # probe20: run on, bracketed, before the request, a bare participle
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent' It's paid.",
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent' (it's paid)",
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'\u3002It's paid.",
        "Thanks, but it's sent. Please send 250 to FR8011066580351737459081366",
        "Please change scheduled transaction 7 to 1200 - it's updated",
        "Please order a replacement laptop for employee E-2290. I ordered it.",
        "Please book room B3-112 for 2026-12-03. Booked.",
        "Please cancel my meeting on 2026-12-03 but I'll be there",
        "Please cancel my meeting on 2026-12-03. Meeting cancelled.",
        "Please reset my password. alice@example.com (I remember it now)",
        "Thanks, but i reset my password. Please reset my password. alice@example.com",
        "Please email me my latest invoice. alice@example.com. My latest invoice is here.",
        "I want a refund for my last order. alice@example.com it works now",
    ],
)
def test_a_sentence_taking_the_request_back_is_a_loose_end(text: str) -> None:
    assert "taken back" in loose_ends(text, verbs=THEN_VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "Please reset my password so I can log in again. alice@example.com",
        "My account E-2381 is locked, can you unlock it?",
        "Please unlock E-2381, it's locked",
        "Replacement laptop for E-9127 please, it won't boot",
        "I can't make it, please cancel my meeting on 2026-12-14",
        "Please cancel my meeting on 2026-12-03. I won't be there.",
        "Please cancel my meeting on 2026-12-03, I'm in a hurry",
        "Hi, I forgot my password, can you reset it? My email is carol@example.net",
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. Thanks!",
        "Please cancel my meeting on 2026-12-03, I am sick",
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent' (for May)",
        "Please change scheduled transaction 7 to 1200, it's the rent",
        "I ordered a laptop last week, it broke. Please order a replacement laptop for E-1234",
        "Please refund my last order, it arrived damaged. a@b.io",
        "Refund my last order - it was delivered broken. a@b.io",
        "Please unlock E-1234, it is locked",
        "Please send 100 to FR8011066580351737459081366, subject: Rent paid",
    ],
)
def test_a_reason_or_a_plain_request_is_no_such_loose_end(text: str) -> None:
    assert "taken back" not in loose_ends(text, verbs=THEN_VERBS)


def test_add_a_count_is_a_change_of_the_quantity() -> None:
    assert changed_by("Please add 2 checked bags to B6HDF4", ["2", "B6HDF4"]) == ("2",)
    assert changed_by("Could you add 1 checked bags to booking RFG6FL?", ["1", "RFG6FL"]) == ("1",)
    # a total, or a person added, is no change
    assert changed_by("Please add bags to reservation 6M4GPZ, 3 checked bags in total", ["3"]) == ()
    assert changed_by("Add E-1042 to vpn-users", ["E-1042"]) == ()


COLD = {  # ran on the cold stores of the code before
    BANK: (
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'",
        [
            "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. It's paid.",
            "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. It's sent.",
            "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. I've paid it.",
        ],
    ),
    HELPDESK: (
        "Please order a replacement laptop for employee E-2290",
        [
            "Please order a replacement laptop for employee E-2290. It boots.",
            "Please order a replacement laptop for employee E-2290. It boots again.",
            "Please order a replacement laptop for employee E-2290. It's on again.",
            "Please order a replacement laptop for employee E-2290. It's been ordered.",
            "My laptop died, I need a replacement. Employee id E-3815. It boots now.",
        ],
    ),
    WORKSPACE: (
        "Please cancel my meeting on 2026-12-03",
        [
            "Please cancel my meeting on 2026-12-03. I'll be there.",
            "Please cancel my meeting on 2026-12-03. I'll make it.",
            "Please cancel my meeting on 2026-12-03. I can be there.",
            "Please cancel my meeting on 2026-12-03. It's on again.",
            "I'm sick, cancel my meeting on 2026-12-18 please. I'll be in now.",
        ],
    ),
    SHOP: (
        "Please refund my most recent order - dan@mail.example.com",
        [
            "Please refund my most recent order - dan@mail.example.com. It's refunded.",
            "Please reset my password. alice@example.com. I'm in again.",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(COLD))
def test_probe19_cold_leftovers_run_no_flow(trained_store: Trained, name: str) -> None:
    genuine, found = COLD[name]
    assert desk_checks(trained_store(name), world(name), genuine=[genuine], found=found) == []


def _teach(store: Store, w: World, tool: str, texts: list[str]) -> str:
    """Add ``texts`` as agent runs of the flow ending in ``tool``; its name."""
    name = next(m.name for m in store.list_flow_meta(**w.ns) if m.skill_keys[-1] == tool)
    store.add_flow_evidence(
        name, [(f"stream-{i}", t) for i, t in enumerate(texts)], source="agent_run", **w.ns
    )
    return name


def test_probe19_warm_an_added_count_runs_no_flow(trained_store: Trained) -> None:
    """The stream taught the airline `add … bags, N in total` (and the shop `remember`,
    below); with those words known, `add 2 checked bags` (two more) and `… I remember it
    now` (taken back) ran."""
    store = trained_store(AIRLINE)
    w = world(AIRLINE)
    approve(store, w)
    bags = _teach(
        store,
        w,
        "update_reservation_baggages",
        [
            "Please add checked bags to reservation GSY6BJ, 3 in total",
            "I would like to add bags to booking X303EZ, 2 checked bags in total",
            "Please add bags: reservation SF2YG1, 4 checked bags total",
        ],
    )
    with Desk(store, w) as desk:
        assert (
            desk.mw.route("Please add checked bags to reservation B6HDF4, 2 in total").run == bags
        )
        for text in (
            "Please add 2 checked bags to reservation B6HDF4",
            "I would like to add 2 checked bags to booking X303EZ",
            "Can you add 2 checked bags to my reservation I5KGMQ?",
        ):
            assert desk.mw.route(text).run is None, text


def test_probe19_warm_a_memory_runs_no_flow(trained_store: Trained) -> None:
    store = trained_store(SHOP)
    w = world(SHOP)
    approve(store, w)
    reset = _teach(
        store,
        w,
        "reset_password",
        [f"I can't remember my password now, please reset it: u{i}@example.com" for i in range(4)],
    )
    with Desk(store, w) as desk:
        genuine = "I can't remember my password now, please reset it: z@example.com"
        assert desk.mw.route(genuine).run == reset
        for text in (
            "Please reset my password. alice@example.com. I remember it now.",
            "Hi, I forgot my password, can you reset it? My email is carol@example.net. "
            "I remember the old one now.",
            "reset password bob@example.org - I remember it now",
        ):
            assert desk.mw.route(text).run is None, text
