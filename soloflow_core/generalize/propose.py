"""The proposed flow of a mined pattern: steps, argument templates, data-flow
dependencies, map steps for loops, input schema.

Example:
    >>> flow, confidence = propose_flow(["find", "orders"], occurrences, observed=3)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from soloflow_core.errors import SoloFlowError
from soloflow_core.generalize.align import without_unrelated_calls
from soloflow_core.generalize.arguments import Occurrence, generalize
from soloflow_core.generalize.dataflow import dataflow_depends_on, side_effects_from_calls
from soloflow_core.generalize.loops import ListWalk, find_list_walk
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.models.names import printable

__all__ = ["FlowProposal", "flow_name_for", "propose", "propose_flow", "title_case"]


def flow_name_for(tool_sequence: Sequence[str]) -> str:
    """``Auto: a → b``; a control character of a tool's name written as its escape."""
    return printable("Auto: " + " → ".join(tool_sequence))


def title_case(tool_name: str) -> str:
    return " ".join(w.capitalize() for w in tool_name.replace("-", "_").split("_") if w)


@dataclass(slots=True)
class FlowProposal:
    """A proposed flow with what the inference found on the way."""

    flow: FlowDefinition
    confidence: dict[str, dict[str, float]]
    """Per step, per argument (``_item.<arg>`` for a map step's item argument)."""
    notes: list[str] = field(default_factory=list)
    """Choices and limits a person should know (source ties, loops not generalised, …)."""
    loops: dict[int, ListWalk] = field(default_factory=dict)
    free_inputs: list[str] = field(default_factory=list)
    """Inputs that are neither constants, upstream fields nor found in the task text."""

    @property
    def overall_confidence(self) -> float:
        vals = [v for step in self.confidence.values() for v in step.values()]
        return round(sum(vals) / len(vals), 3) if vals else 1.0


def _loops(
    n: int, occurrences: Sequence[Occurrence], repeated: Collection[int], *, notes: list[str]
) -> dict[int, ListWalk]:
    seen_multi = {
        i
        for i in range(n)
        for o in occurrences
        if len(o.step_calls) > i and len(o.step_calls[i]) > 1
    }
    # A step the miner saw repeated, whose recorded calls show one call in every occurrence
    # (once unrelated calls of its tool are left out), walks no list: a list of one item
    # is read as that item.
    known = {
        i for i in range(n) if all(len(o.step_calls) > i and o.step_calls[i] for o in occurrences)
    }
    walks: dict[int, ListWalk] = {}
    for i in sorted((set(repeated) - known) | seen_multi):
        if not 0 <= i < n:
            continue
        walk = find_list_walk(i, occurrences, loops=set(walks))
        if walk is None:
            if i in seen_multi:
                notes.append(
                    f"step_{i + 1} repeats in a row but its arguments walk no list of an earlier "
                    "output; kept as one call (replay diverges where the agent called it more "
                    "than once)"
                )
            continue
        walks[i] = walk
        if walk.holds < walk.total:
            notes.append(
                f"step_{i + 1}: the list walk holds in {walk.holds} of {walk.total} "
                "occurrences (the others used part of the list)"
            )
    return walks


def propose(
    tool_sequence: Sequence[str],
    occurrences: Sequence[Occurrence],
    *,
    observed: int,
    repeated_steps: Collection[int] = (),
    side_effects: Mapping[str, bool | None] | None = None,
) -> FlowProposal:
    """Propose a flow and say how sure the inference is.

    Args:
        tool_sequence: one tool per step, in the observed order.
        occurrences: aligned occurrences (may be empty: then every argument is unknown).
        observed: how many times the pattern was seen (for the description).
        repeated_steps: 0-based steps seen as loops; each becomes a map step when its
            argument walks a list of an earlier output.
        side_effects: tool → False for read-only tools (configuration); merged over what
            the recorded calls' metadata says. Only read-only steps may run in parallel.

    Raises:
        SoloFlowError: the occurrences do not align with the sequence (says why).
    """
    n = len(tool_sequence)
    notes: list[str] = []
    walks: dict[int, ListWalk] = {}
    gen = None
    if occurrences:
        if len(occurrences[0].args) != n:
            raise SoloFlowError(
                f"flow {flow_name_for(tool_sequence)!r}: occurrences have {len(occurrences[0].args)} "
                f"steps, the sequence {n}; pass the occurrences of this very sequence"
            )
    # A call of a step's tool that takes none of the step's arguments is the agent's own
    # (a lookup just before or after the step), not one more pass of a loop.
    occurrences = without_unrelated_calls(occurrences)
    effects: dict[str, bool | None] = {}
    for o in occurrences:
        for calls in o.step_calls:
            effects.update(
                {k: v for k, v in side_effects_from_calls(calls).items() if k not in effects}
            )
    effects.update(side_effects or {})
    if occurrences:
        walks = _loops(n, occurrences, repeated_steps, notes=notes)
        gen = generalize(
            occurrences,
            loops={i: w.key for i, w in walks.items()},
            side_effects=[effects.get(t) for t in tool_sequence],
        )
        notes += gen.notes
    input_maps = [dict(gen.input_maps[i]) if gen else {} for i in range(n)]
    map_over: list[str | None] = [None] * n
    confidence = gen.confidence() if gen else {}
    for i, w in walks.items():
        input_maps[i] = {w.key: w.item_template, **input_maps[i]}
        map_over[i] = w.map_over
        confidence.setdefault(f"step_{i + 1}", {})[f"_item.{w.key}"] = round(w.confidence, 3)
    deps = dataflow_depends_on(tool_sequence, input_maps, side_effects=effects, map_over=map_over)
    steps = [
        FlowStep(
            id=f"step_{i + 1}",
            name=title_case(name),
            skill_key=name,
            depends_on=deps[i],
            output_key=f"step_{i + 1}",
            input_map=input_maps[i],
            map_over=map_over[i],
        )
        for i, name in enumerate(tool_sequence)
    ]
    description = (
        f"Auto-generated from {observed} observed repetitions of " + " → ".join(tool_sequence) + "."
    )
    if notes:
        description += " Notes: " + " | ".join(notes)
    flow = FlowDefinition(
        name=flow_name_for(tool_sequence),
        description=description,
        steps=steps,
        tags=["auto-generated", "flow-offload"],
        input_schema=gen.input_schema if gen else {"type": "object", "properties": {}},
        extraction=gen.extraction if gen else {},
    )
    free = [
        s.input_name
        for srcs in (gen.sources if gen else [])
        for s in srcs.values()
        if s.kind == "free" and s.input_name
    ]
    return FlowProposal(flow, confidence, notes, loops=walks, free_inputs=list(dict.fromkeys(free)))


def propose_flow(
    tool_sequence: Sequence[str],
    occurrences: Sequence[Occurrence],
    *,
    observed: int,
    repeated_steps: Collection[int] = (),
    side_effects: Mapping[str, bool | None] | None = None,
) -> tuple[FlowDefinition, dict[str, dict[str, float]]]:
    """The proposed flow and its per-argument confidence (see :func:`propose`).

    Occurrences that cannot be generalised do not stop detection: the flow is proposed
    without argument inference and its description says why.
    """
    try:
        p = propose(
            tool_sequence,
            occurrences,
            observed=observed,
            repeated_steps=repeated_steps,
            side_effects=side_effects,
        )
    except SoloFlowError as exc:
        p = propose(tool_sequence, (), observed=observed, side_effects=side_effects)
        p.flow = p.flow.model_copy(
            update={"description": p.flow.description + f" Arguments not generalised: {exc}"}
        )
    return p.flow, p.confidence
