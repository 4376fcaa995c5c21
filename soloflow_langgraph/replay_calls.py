"""Which recorded calls a flow's step stands for when a held-out occurrence is replayed
(:mod:`soloflow_langgraph.verify`): calls of the step's tool taking none of its arguments
are the agent's own; an occurrence whose calls at some step take none of them is the tools
met by chance; read-only steps the agent repeated before a side effect were exploration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from soloflow_core.generalize.align import related_calls
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.dataflow import side_effects_from_calls
from soloflow_core.generalize.loops import step_calls_of
from soloflow_core.models import FlowDefinition, FlowStep


def step_calls(step: FlowStep, occ: Occurrence, i: int) -> list[tuple[dict[str, Any], Any]]:
    """(args, output) of the recorded calls of step ``i`` that the flow's step stands for:
    a call of its tool taking none of the step's arguments is the agent's own, not the step's
    (:func:`related_calls`)."""
    calls = step_calls_of(occ, i)
    if len(calls) < 2:
        return calls
    kept = related_calls([_Call(a, o) for a, o in calls], step.input_map.keys())
    return [(c.args, c.output) for c in kept]


def of_flow(flow: FlowDefinition, occ: Occurrence) -> bool:
    """Whether every step's recorded calls take at least one of the step's arguments."""
    for i, step in enumerate(flow.steps[: len(occ.args)]):
        names = set(step.input_map)
        if names and not any(names & set(args) for args, _ in step_calls_of(occ, i)):
            return False
    return True


@dataclass(frozen=True, slots=True)
class _Call:
    args: dict[str, Any]
    output: Any


def explored_steps(
    flow: FlowDefinition, occ: Occurrence, side_effects: Mapping[str, bool | None]
) -> set[str]:
    """Read-only steps the flow calls once (no map step), that the agent called several
    times in a row, *before* a step that may have side effects: the agent explored on the
    way to the effect; one of those calls is the flow's. A step's side effects are its own
    flag, else ``side_effects``, else the recorded calls' metadata, else assumed."""
    effects: list[bool | None] = []
    for i, step in enumerate(flow.steps):
        calls = occ.step_calls[i] if len(occ.step_calls) > i else ()
        flag = step.side_effects
        if flag is None:
            flag = side_effects.get(step.skill_key)
        if flag is None:
            flag = side_effects_from_calls(calls).get(step.skill_key)
        effects.append(flag)
    return {
        step.id
        for i, step in enumerate(flow.steps)
        if effects[i] is False
        and not step.map_over
        and len(occ.step_calls) > i
        and len(occ.step_calls[i]) > 1
        and any(e is not False for e in effects[i + 1 :])
    }
