"""Find a tool sequence's occurrences in recorded runs, for generalising and replay.

Errored calls are dropped first (the agent's retries are not part of the flow). A step
listed in ``repeated_steps`` (or any step, with ``loops="any"``) takes every consecutive
call of its tool, so a loop's k calls become one step with k ``step_calls``.

Such a run of calls may hold a call that is no part of the step: the agent called the same
tool for something else just before or after it (``{"query": ...}`` beside the step's
``{"order_id", "amount"}``). :func:`without_unrelated_calls` leaves those out, judged by the
step's usual argument names, and :func:`related_calls` by a flow step's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any, Literal

from soloflow_core.generalize.arguments import Occurrence

__all__ = [
    "TOLERATED_GAP",
    "find_occurrence",
    "find_occurrences",
    "related_calls",
    "without_unrelated_calls",
]

TOLERATED_GAP = 1
"""Stray calls tolerated between two steps where a flow is read against recorded runs
(verification, promotion, export): the miner's own default
(``RankingOptions.max_gap``), so a flow mined from noisy runs is verified on them."""


def find_occurrence(
    calls: Sequence[Any],
    tool_sequence: Sequence[str],
    *,
    task: str = "",
    repeated_steps: Collection[int] | Literal["any"] = "any",
    max_gap: int = 0,
) -> Occurrence | None:
    """The first occurrence of ``tool_sequence`` among ``calls`` (ToolCalls): contiguous,
    else — when ``max_gap`` > 0 — the first with at most ``max_gap`` stray calls between two
    consecutive steps (the miner's tolerance, :attr:`RankingOptions.max_gap
    <soloflow_core.mining.options.RankingOptions.max_gap>`: an agent's stray lookup between
    two steps does not hide the flow's occurrence). Stray calls are no step's: their
    outputs are not the flow's, and a step that read one does not replay."""
    ok = [c for c in calls if not getattr(c, "error", False)]
    names = [c.name for c in ok]
    for gap in range(max(0, max_gap) + 1):
        for start in range(len(ok)):
            spans = _spans_from(names, tool_sequence, start, gap=gap, repeated=repeated_steps)
            if spans is not None:
                picked = [ok[a:b] for a, b in spans]
                return Occurrence(
                    task=task,
                    args=[dict(s[-1].args or {}) for s in picked],
                    outputs=[s[-1].output for s in picked],
                    step_calls=[list(s) for s in picked],
                )
    return None


def _spans_from(
    names: Sequence[str],
    tool_sequence: Sequence[str],
    start: int,
    *,
    gap: int,
    repeated: Collection[int] | Literal["any"],
) -> list[tuple[int, int]] | None:
    """(start, end) of each step's run of calls when ``tool_sequence`` occurs from
    ``start``, with at most ``gap`` stray calls between two steps (the nearest next call of
    the step's tool is taken); None when it does not."""
    n, pos, spans = len(tool_sequence), start, []
    for i, tool in enumerate(tool_sequence):
        reach = pos if i == 0 else min(pos + gap, len(names) - 1)
        at = next((k for k in range(pos, reach + 1) if k < len(names) and names[k] == tool), None)
        if at is None:
            return None
        end = at + 1
        loopable = repeated == "any" or i in repeated
        if loopable and (i + 1 == n or tool_sequence[i + 1] != tool):
            while end < len(names) and names[end] == tool:
                end += 1
        spans.append((at, end))
        pos = end
    return spans


def find_occurrences(
    runs: Sequence[Any],
    tool_sequence: Sequence[str],
    *,
    repeated_steps: Collection[int] | Literal["any"] = "any",
    max_gap: int = 0,
) -> list[tuple[str, Occurrence]]:
    """(run id, occurrence) for every run (``TaskRun``) that holds the sequence (first one;
    ``max_gap`` as :func:`find_occurrence`)."""
    out = []
    for run in runs:
        occ = find_occurrence(
            run.tool_calls,
            tool_sequence,
            task=run.task or "",
            repeated_steps=repeated_steps,
            max_gap=max_gap,
        )
        if occ is not None:
            out.append((run.run_id, occ))
    return out


def _names(call: Any) -> frozenset[str]:
    return frozenset(getattr(call, "args", None) or {})


def related_calls(calls: Sequence[Any], names: Collection[str]) -> list[Any]:
    """``calls`` (one step's run of calls of its tool) without those that take none of the
    argument ``names`` the step takes: unrelated calls of the same tool. All of them when
    ``names`` is empty or no call takes any of them."""
    usual = frozenset(names)
    kept = [c for c in calls if not usual or _names(c) & usual]
    return kept or list(calls)


def _usual_names(occurrences: Sequence[Occurrence], i: int) -> frozenset[str]:
    """The argument names step ``i`` takes in most occurrences (counting each occurrence
    once), else none. Most, not nearly all: where the tools are common, a share of the
    occurrences are chance meetings of the tools, called for something else."""
    counts: dict[frozenset[str], int] = {}
    for o in occurrences:
        calls = o.step_calls[i] if len(o.step_calls) > i and o.step_calls[i] else ()
        seen = {_names(c) for c in calls} or {frozenset(o.args[i])}
        for names in seen:
            counts[names] = counts.get(names, 0) + 1
    if not counts:
        return frozenset()
    usual = max(counts, key=lambda k: counts[k])
    return usual if 2 * counts[usual] > len(occurrences) else frozenset()


def without_unrelated_calls(occurrences: Sequence[Occurrence]) -> list[Occurrence]:
    """The occurrences with each step's unrelated calls of its tool left out
    (:func:`related_calls`, by the argument names the step takes in most occurrences);
    a step that lost calls is represented by its last remaining call."""
    out = list(occurrences)
    if not out:
        return out
    for i in range(len(out[0].args)):
        usual = _usual_names(out, i)
        if not usual:
            continue
        for k, o in enumerate(out):
            calls = o.step_calls[i] if len(o.step_calls) > i else ()
            if len(calls) < 2:
                continue
            kept = related_calls(calls, usual)
            if len(kept) == len(calls):
                continue
            step_calls = [list(c) for c in o.step_calls]
            step_calls[i] = kept
            args, outputs = list(o.args), list(o.outputs)
            args[i] = dict(getattr(kept[-1], "args", None) or {})
            outputs[i] = getattr(kept[-1], "output", None)
            out[k] = replace(o, args=args, outputs=outputs, step_calls=step_calls)
    return out
