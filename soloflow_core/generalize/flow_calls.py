"""Which recorded calls a flow's step stands for, in a run that holds the flow's tools.

One alignment for every stage that reads a flow against recorded runs — replay
verification (``soloflow_langgraph.verify``), the reply template learned on promotion
(:mod:`soloflow_core.learning.promotion`), the fixtures of an exported skill
(:mod:`soloflow_core.skills.exporter`) — so that they judge the same calls:

- every step takes its *run* of consecutive calls of its tool, and one stray call between two
  steps does not hide an occurrence, as in mining (:func:`flow_occurrences`);
- a call of the step's tool taking none of the step's arguments is the agent's own, not the
  step's (:func:`step_calls`);
- an occurrence whose calls at some step take none of the step's arguments is the tools met
  by chance, not the flow (:func:`of_flow`);
- a read-only step the flow calls once that the agent repeated before a side effect was
  exploration: one of its calls is the flow's (:func:`explored_steps`).

A tool's side effects are the step's own flag, else the given ``side_effects`` (tool →
bool), else what its recorded calls' metadata says
(:func:`~soloflow_core.generalize.dataflow.side_effects_from_calls`), else assumed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from soloflow_core.generalize.align import TOLERATED_GAP, find_occurrences, related_calls
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.dataflow import side_effects_from_calls
from soloflow_core.generalize.loops import step_calls_of
from soloflow_core.models import FlowDefinition, FlowStep

__all__ = [
    "explored_steps",
    "flow_occurrence",
    "flow_occurrences",
    "known_side_effects",
    "of_flow",
    "split_by_task",
    "step_calls",
]


def step_calls(step: FlowStep, occ: Occurrence, i: int) -> list[tuple[dict[str, Any], Any]]:
    """(args, output) of the recorded calls of step ``i`` that the flow's step stands for:
    a call of its tool taking none of the step's arguments is the agent's own, not the step's
    (:func:`~soloflow_core.generalize.align.related_calls`)."""
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


def flow_occurrence(flow: FlowDefinition, occ: Occurrence) -> Occurrence | None:
    """``occ`` as ``flow``'s: None when it is not the flow's (:func:`of_flow`), else with each
    step's unrelated calls of its tool left out (:func:`step_calls`); a step that lost calls
    is represented by its last remaining call. The recorded call objects are kept, with their
    metadata."""
    if not of_flow(flow, occ):
        return None
    step_lists = [list(c) for c in occ.step_calls]
    args, outputs = list(occ.args), list(occ.outputs)
    changed = False
    for i, step in enumerate(flow.steps[: len(occ.args)]):
        calls = step_lists[i] if len(step_lists) > i else []
        if len(calls) < 2:
            continue
        kept = related_calls(calls, step.input_map.keys())
        if len(kept) == len(calls):
            continue
        step_lists[i] = kept
        args[i] = dict(getattr(kept[-1], "args", None) or {})
        outputs[i] = getattr(kept[-1], "output", None)
        changed = True
    if not changed:
        return occ
    return replace(occ, args=args, outputs=outputs, step_calls=step_lists)


def flow_occurrences(
    runs: Sequence[Any], flow: FlowDefinition, *, tool_sequence: Sequence[str] | None = None
) -> tuple[list[tuple[str, Occurrence]], list[str]]:
    """(run id, occurrence) of ``flow`` in each run (``TaskRun``) that holds its tools
    (``tool_sequence``, default the steps' tools) — each step given its run of calls of its
    tool, less the unrelated ones (:func:`flow_occurrence`) — and the ids of the runs whose
    occurrence is not the flow's (:func:`of_flow`: the tools called for something else)."""
    sequence = (
        list(tool_sequence) if tool_sequence is not None else [s.skill_key for s in flow.steps]
    )
    found = find_occurrences(runs, sequence, repeated_steps="any", max_gap=TOLERATED_GAP)
    if len(sequence) != len(flow.steps):  # not this flow's tools: nothing to narrow by
        return found, []
    kept: list[tuple[str, Occurrence]] = []
    chance: list[str] = []
    for run_id, occ in found:
        mine = flow_occurrence(flow, occ)
        if mine is None:
            chance.append(run_id)
        else:
            kept.append((run_id, mine))
    return kept, chance


def known_side_effects(
    flow: FlowDefinition,
    *,
    given: Mapping[str, bool | None] | None = None,
    recorded: Mapping[str, bool] | None = None,
) -> dict[str, bool]:
    """Tool → side-effects flag for ``flow``'s tools: a step's own flag, else ``given``
    (configuration, the tools' metadata), else ``recorded`` (the calls' metadata)."""
    out: dict[str, bool] = {}
    for k, v in (recorded or {}).items():
        out[k] = v
    for k, flag in (given or {}).items():
        if flag is not None:
            out[k] = flag
    for step in flow.steps:
        if step.side_effects is not None:
            out[step.skill_key] = step.side_effects
    return out


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


def split_by_task(tasks: Sequence[str], every: int = 3) -> tuple[list[int], list[int], int]:
    """(train, held out, replays set aside): indices into occurrences whose task texts are
    ``tasks``, split by *task*, so that no held-out occurrence replays a training one.

    Occurrences of one task (the same text, so the same values: a retried or re-run task)
    go to one side. A third of the distinct tasks (``1 / every``, rounded, one at the least
    when there are two) are held out, evenly spread and the last one first; each is replayed
    once (its first occurrence), its other occurrences are counted as set aside. An empty
    task text is a task of its own: nothing tells its replays apart. Splitting by index
    instead holds out occurrences of tasks already trained on when a few tasks repeat often,
    and a flow that hard-coded their values would pass."""
    groups: dict[str, list[int]] = {}
    for k, task in enumerate(tasks):
        groups.setdefault(task or f"\x00{k}", []).append(k)
    order = list(groups.values())
    n = len(order)
    count = max(1, round(n / every)) if n >= 2 else 0
    chosen = {n - 1 - round(i * n / count) for i in range(count)}
    held_groups = [order[k] for k in sorted(chosen)]
    train = sorted(k for pos, g in enumerate(order) if pos not in chosen for k in g)
    held = sorted(g[0] for g in held_groups)
    return train, held, sum(len(g) - 1 for g in held_groups)
