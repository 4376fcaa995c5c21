"""Routing in a fifth world, written blind: the calendar, e-mail and files workspace of
``benchmarks/routing_world_workspace.py`` (probe8).

A real ``create_agent`` agent learns four jobs — share a file, cancel a meeting on a date,
invite a person to an event, forward an e-mail — and a person approves the flows. Of its 486
near misses, 25 ran before: 20 were a served request with a yes-or-no prompt after it
(``Cancel my meeting on 2027-01-04? Y/N``, ``… (y/n)``, ``… y or n``, ``… (?)``), which now
run no flow. The 5 left were the ones the probe itself judged arguably genuine — a meeting
cancelled on a past date and ``… on 2027-01-04?!`` — pinned here so that any other near miss
that runs fails the test. ``?!`` is read as asked since probe22, and a day that has passed
is set aside where the job's dates were all days to come when asked
(``tests/test_days_to_come.py``, on the world's own clock). This test's store learns on the
real clock: after the training requests' days (2026-12) that is not learned, so the four
past days stay allowed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from routing_support import WORKSPACE, Desk, approve, world

from benchmarks import routing_world_workspace as W
from soloflow_core.memory.forms import asks_yes_or_no
from soloflow_core.store import Store

Trained = Callable[[str], Store]
WS = world(WORKSPACE)
ARGUABLY_GENUINE = {
    "Cancel my meeting on 2025-12-03",
    "Cancel my meeting on 2024-06-11",
    "Cancel my meeting on 1999-12-31",
    "Cancel my meeting on 2026-11-20",
    "Cancel my meeting on 2027-01-04?!",
}


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def test_no_near_miss_runs_but_the_five_arguably_genuine(trained_store: Trained):
    store = trained_store(WORKSPACE)
    approve(store, WS)
    near = [r["text"] for r in W.load_corpus() if r["split"] == "test" and r["job"] is None]
    near += [text for text, job in W.HOSTILE if job is None]
    assert len(near) >= 480
    with Desk(store, WS) as desk:
        ran = set()
        for text in near:
            got = desk.ask(text)
            if got["flow"] is not None or got["effects"] or got["calls"] == 0:
                ran.add(text)
        assert ran <= ARGUABLY_GENUINE, sorted(ran - ARGUABLY_GENUINE)
        # the request itself, without its yes-or-no prompt, is the job
        got = desk.ask("Cancel my meeting on 2027-01-04")
        assert got["calls"] == 0 and [e["tool"] for e in got["effects"]] == ["cancel_event"]


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Cancel my meeting on 2027-01-04? Y/N", True),
        ("Cancel my meeting on 2027-01-04 (y/n)", True),
        ("Invite a@b.io to EVT-4731 y or n", True),
        ("Invite a@b.io to EVT-4731 (?)", True),
        ("yes, cancel my meeting on 2027-01-04", False),
        ("Share Y/N-report.pdf with a@b.io", False),
    ],
)
def test_a_yes_or_no_prompt_is_read(text: str, asks: bool):
    assert asks_yes_or_no(text) is asks


def test_a_sender_named_after_from_is_the_inputs_own_role(trained_store: Trained):
    store = trained_store(WORKSPACE)
    approve(store, WS)
    with Desk(store, WS) as desk:
        got = desk.mw.route(
            "Please forward the last e-mail from ann@contoso.example to bo@contoso.example"
        )
        assert got.run is not None, got
        assert set(got.inputs.values()) == {"ann@contoso.example", "bo@contoso.example"}
        # one address in both roles, which the job's requests never did: the model decides
        same = desk.mw.route(
            "Forward the last e-mail from tom.baker@northwind.example to tom.baker@northwind.example"
        )
        assert same.run is None
        assert any("are both" in r for c in same.checks for r in c.reasons), same
