"""soloflow_core.generalize.flow_calls: which recorded calls a flow's step stands for, the one
alignment verify, promotion and export read runs through."""

from __future__ import annotations

from soloflow_core.generalize.flow_calls import (
    explored_steps,
    flow_occurrences,
    known_side_effects,
)
from soloflow_core.models import FlowDefinition, TaskRun, ToolCall

FLOW = FlowDefinition.model_validate(
    {
        "name": "cancel",
        "steps": [
            {"id": "s1", "skill_key": "get_order", "input_map": {"order_id": "{{_trigger.o}}"}},
            {
                "id": "s2",
                "skill_key": "cancel_order",
                "input_map": {"order_id": "{{_trigger.o}}"},
            },
        ],
    }
)


def _run(rid: str, calls: list[tuple[str, dict[str, str]]]) -> TaskRun:
    return TaskRun(
        run_id=rid,
        user_id="u",
        agent_id="a",
        task="t",
        tool_calls=[ToolCall(name=n, args=a, output=f"{n}:{a}") for n, a in calls],
    )


def test_each_step_takes_its_run_of_calls_less_the_agents_own() -> None:
    runs = [
        _run(
            "mine",
            [
                ("get_order", {"order_id": "O1"}),
                ("get_order", {"order_id": "O2"}),
                ("get_order", {"tracking": "T9"}),  # the agent's own: none of the step's args
                ("cancel_order", {"order_id": "O2"}),
            ],
        ),
        _run("chance", [("get_order", {"tracking": "T1"}), ("cancel_order", {"order_id": "O3"})]),
    ]
    found, chance = flow_occurrences(runs, FLOW)
    assert chance == ["chance"]
    ((rid, occ),) = found
    assert rid == "mine"
    assert [c.args for c in occ.step_calls[0]] == [{"order_id": "O1"}, {"order_id": "O2"}]
    # The step is represented by its last related call, not the parcel lookup after it.
    assert occ.args[0] == {"order_id": "O2"} and occ.outputs[0] == "get_order:{'order_id': 'O2'}"
    # Read-only before a side effect: the repeats were exploration.
    assert explored_steps(FLOW, occ, {"get_order": False}) == {"s1"}
    assert explored_steps(FLOW, occ, {}) == set()


def test_a_steps_own_flag_wins_over_what_is_given_and_recorded() -> None:
    flagged = FLOW.model_copy(
        update={"steps": [FLOW.steps[0].model_copy(update={"side_effects": True}), FLOW.steps[1]]}
    )
    effects = known_side_effects(
        flagged, given={"get_order": False, "x": None}, recorded={"cancel_order": True, "y": False}
    )
    assert effects == {"get_order": True, "cancel_order": True, "y": False}
