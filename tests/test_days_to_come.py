"""A job that always acted on days to come is not run unasked for a day that has passed.

The workspace world's agent learned ``cancel_meeting`` from requests naming days to come
(``Cancel my meeting on 2026-12-03``, asked on 2026-11-28). Before, ``Cancel my meeting on
1999-12-31`` ran it with no model call: the gate has no calendar, and the date was a real
date of the learned form. Now the date input's extraction rule holds ``to_come`` — learned
from each training run's start time (the ledger's ``started_at``, read by the detector on
both stores) — and routing sets aside a date before the earliest day anywhere on Earth. The
world runs on its own clock (``CLOCK``, with ``time-machine``), so the test means the same
on any day it runs.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
import time_machine
from routing_support import WORKSPACE, Desk, approve, train, world

from benchmarks import routing_world_workspace as W
from soloflow_core.errors import FlowValidationError
from soloflow_core.flow.validate import validate_flow
from soloflow_core.generalize.extraction import learn_extraction
from soloflow_core.generalize.shapes import bound_problem, earliest_day, learn_to_come
from soloflow_core.models import FlowDefinition
from soloflow_core.store import Store

WS = world(WORKSPACE)
ASKED = datetime(2026, 11, 28, 12, tzinfo=UTC)


def test_earliest_day_is_the_day_in_the_westmost_zone():
    assert earliest_day(datetime(2026, 11, 28, 12, tzinfo=UTC)) == date(2026, 11, 28)
    assert earliest_day(datetime(2026, 11, 28, 11, 59, tzinfo=UTC)) == date(2026, 11, 27)
    assert earliest_day(datetime(2026, 11, 28, 12)) == date(2026, 11, 28)  # naive: UTC


@pytest.mark.parametrize(
    ("values", "asked", "to_come"),
    [
        (["2026-12-03", "2026-12-07", "2026-11-28"], [ASKED] * 3, True),  # that day counts
        (["2026-12-03", "2026-12-07", "2026-11-27"], [ASKED] * 3, False),  # one had passed
        (["2026-12-03", "2026-12-07"], [ASKED] * 2, False),  # two examples: by chance
        (["2026-12-03", "2026-12-07", "2026-12-09"], [ASKED, None, ASKED], False),  # untimed
        (["2026-12-03", "2026-12-07", "2026-12-09"], [ASKED] * 2, False),  # not one per value
        (["2022-07-18", "2022-03-28", "2022-06-07"], [ASKED] * 3, False),  # history, asked
    ],
)
def test_to_come_is_learned_only_when_every_timed_example_was(
    values: list[str], asked: list[datetime | None], to_come: bool
):
    assert learn_to_come(values, asked, "%Y-%m-%d") is to_come


def test_the_extraction_rule_holds_it_and_routing_sets_a_past_day_aside():
    values = ["2026-12-03", "2026-12-07", "2026-12-10"]
    tasks = [f"Cancel my meeting on {v}" for v in values]
    rule = learn_extraction(values, tasks, asked_at=[ASKED] * 3)
    assert rule is not None and rule["to_come"] is True and rule["date_format"] == "%Y-%m-%d"
    assert "to_come" not in (learn_extraction(values, tasks) or {})  # no times: no bound
    today = date(2026, 11, 29)
    why = bound_problem("2026-11-28", rule, today=today)
    assert why is not None and "day that has passed" in why
    assert bound_problem("2026-11-29", rule, today=today) is None
    assert bound_problem("2031-01-01", rule, today=today) is None


def test_a_hand_written_to_come_must_be_true_or_false():
    flow = FlowDefinition.model_validate(
        {
            "name": "cancel",
            "steps": [{"id": "s1", "skill_key": "cancel_event", "input_map": {"d": "{{date}}"}}],
            "input_schema": {"type": "object", "properties": {"date": {"type": "string"}}},
            "extraction": {
                "date": {"shape": "token", "pattern": r"\d{4}-\d{2}-\d{2}", "to_come": "yes"}
            },
        }
    )
    with pytest.raises(FlowValidationError) as err:
        validate_flow(flow)
    assert "extraction.date.to_come" in str(err.value)


def _ask_on(desk: Desk, text: str, day: str) -> dict[str, Any]:
    with time_machine.travel(day, tick=True):
        return desk.ask(text)


def test_a_meeting_on_a_day_that_has_passed_is_not_cancelled_unasked(db_url: str):
    W.EFFECTS.clear()
    with time_machine.travel(W.CLOCK, tick=True), Store.open(db_url) as store:
        train(store, WS)
        approve(store, WS)
        flows = store.list_flows(**WS.ns)
        cancel = next(f for f in flows if f.flow.steps[-1].skill_key == "cancel_event")
        assert cancel.flow.extraction["date"]["to_come"] is True
        with Desk(store, WS) as desk:
            for text in (
                "Cancel my meeting on 1999-12-31",
                "Cancel my meeting on 2026-11-20",
                "Cancel my meeting on 2026-11-27",
            ):
                decision = desk.mw.route(text)
                assert decision.run is None, text
                reasons = [r for c in decision.checks for r in c.reasons]
                assert any("day that has passed" in r for r in reasons), (text, reasons)
                got = desk.ask(text)  # the model decides: it is asked, no flow ran unasked
                assert got["flow"] is None and got["calls"] > 0, text
            got = desk.ask("Cancel my meeting on 2027-01-04")
            assert got["calls"] == 0 and [e["tool"] for e in got["effects"]] == ["cancel_event"]
            # the same request, asked once that day has passed, is the model's to decide
            later = _ask_on(desk, "Cancel my meeting on 2027-01-04", "2027-02-01T12:00:00+00:00")
            assert later["flow"] is None and later["calls"] > 0
    W.EFFECTS.clear()
