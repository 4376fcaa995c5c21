"""Find a tool sequence's occurrences in recorded runs, for generalising and replay.

Errored calls are dropped first (the agent's retries are not part of the flow). A step
listed in ``repeated_steps`` (or any step, with ``loops="any"``) takes every consecutive
call of its tool, so a loop's k calls become one step with k ``step_calls``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

from soloflow_core.generalize.arguments import Occurrence

__all__ = ["find_occurrence", "find_occurrences"]


def find_occurrence(
    calls: Sequence[Any],
    tool_sequence: Sequence[str],
    *,
    task: str = "",
    repeated_steps: Collection[int] | Literal["any"] = "any",
) -> Occurrence | None:
    """The first contiguous occurrence of ``tool_sequence`` among ``calls`` (ToolCalls)."""
    ok = [c for c in calls if not getattr(c, "error", False)]
    names = [c.name for c in ok]
    n = len(tool_sequence)
    for start in range(len(ok)):
        pos, spans = start, []
        for i, tool in enumerate(tool_sequence):
            if pos >= len(ok) or names[pos] != tool:
                break
            end = pos + 1
            loopable = repeated_steps == "any" or i in repeated_steps
            if loopable and (i + 1 == n or tool_sequence[i + 1] != tool):
                while end < len(ok) and names[end] == tool:
                    end += 1
            spans.append(ok[pos:end])
            pos = end
        if len(spans) == n:
            return Occurrence(
                task=task,
                args=[dict(s[-1].args or {}) for s in spans],
                outputs=[s[-1].output for s in spans],
                step_calls=[list(s) for s in spans],
            )
    return None


def find_occurrences(
    runs: Sequence[Any],
    tool_sequence: Sequence[str],
    *,
    repeated_steps: Collection[int] | Literal["any"] = "any",
) -> list[tuple[str, Occurrence]]:
    """(run id, occurrence) for every run (``TaskRun``) that holds the sequence (first one)."""
    out = []
    for run in runs:
        occ = find_occurrence(
            run.tool_calls, tool_sequence, task=run.task or "", repeated_steps=repeated_steps
        )
        if occ is not None:
            out.append((run.run_id, occ))
    return out
