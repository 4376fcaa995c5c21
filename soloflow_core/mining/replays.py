"""What the ranking should not count: tools that only take notes, and replays of one task.

* **Note-taking tools.** A tool that takes nothing but free text and returns nothing, so no
  later call can read its output (τ-bench's ``think``: ``{"thought": "…"}`` → ``""``), does nothing a flow
  needs; the agent calls it here and there, which splits one workflow into many. Such a
  tool (:func:`inert_tools`, judged from a sample of runs) is left out of the ledger the
  miner reads (:func:`without_calls`), so it is never a required step of a flow. So is a
  failed call that the run retries later, even with other calls between (a booking refused
  for its payment, a price computed, the booking again): the retry is the step.
* **Replays.** Runs that replay the same task (the same task text, the same argument values
  in the pattern's calls: a benchmark's trials, a retried job) are one piece of evidence, not
  several: :func:`replay_key` says which occurrences are the same, and the detector counts
  each once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from soloflow_core.generalize.arguments import canonical_json

__all__ = ["MIN_INERT_CALLS", "inert_tools", "kept_calls", "replay_key", "without_calls"]

MIN_INERT_CALLS = 3
"""Calls of a tool seen before it can be judged a note-taking tool."""
_FREE_TEXT_WORDS = 4
_WORD = re.compile(r"[^\W\d_]{2,}")


def _free_text(value: Any) -> bool:
    """Prose: a string of at least four words (a note, not an id, a number or an expression)."""
    return isinstance(value, str) and len(_WORD.findall(value)) >= _FREE_TEXT_WORDS


def _output_text(output: Any) -> str:
    if output is None:
        return ""
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    return text.strip().strip('"')


def inert_tools(runs: Iterable[Any]) -> set[str]:
    """The tools that, in every call of ``runs`` (``TaskRun``-like: ``tool_calls`` with
    ``name``, ``args``, ``output``), take only free text and return nothing (an empty or
    missing output: nothing can read it); seen at least :data:`MIN_INERT_CALLS` times. A
    tool that answers, even only "done" (τ-bench's ``transfer_to_human_agents``), is an
    action and stays.

    Example:
        >>> from soloflow_core.models import TaskRun, ToolCall
        >>> note = {"thought": "the user wants the cheapest direct flight"}
        >>> runs = [TaskRun(tool_calls=[ToolCall(name="think", args=note, output=""),
        ...                             ToolCall(name="book", args={"id": "F1"})])] * 3
        >>> inert_tools(runs)
        {'think'}
    """
    seen: dict[str, int] = {}
    ruled_out: set[str] = set()
    for run in runs:
        calls = list(getattr(run, "tool_calls", None) or ())
        for call in calls:
            name = getattr(call, "name", None)
            args = getattr(call, "args", None)
            if isinstance(name, str) and name not in ruled_out:
                ok = (
                    isinstance(args, dict)
                    and bool(args)
                    and all(_free_text(v) for v in args.values())
                )
                if ok:
                    ok = not _output_text(getattr(call, "output", None))
                if ok:
                    seen[name] = seen.get(name, 0) + 1
                else:
                    ruled_out.add(name)
    return {name for name, n in seen.items() if n >= MIN_INERT_CALLS and name not in ruled_out}


def kept_calls(names: Sequence[str], errors: Sequence[bool | None], drop: set[str]) -> list[bool]:
    """Per call of one run, whether the miner reads it: not a call of a tool in ``drop``,
    nor a failed call whose tool the run calls again later (a retry, even with other calls
    between: the agent fixed the arguments and tried again).

    >>> kept_calls(["a", "book", "calc", "book", "think"], [0, 1, 0, 0, 0], {"think"})
    [True, False, True, True, False]
    """
    out = []
    for i, name in enumerate(names):
        retried = bool(errors[i]) if i < len(errors) else False
        out.append(name not in drop and not (retried and name in names[i + 1 :]))
    return out


def without_calls(columns: Any, drop: set[str]) -> Any:
    """``columns`` (:class:`~soloflow_core.store.ToolNameColumns`) as the miner reads them:
    without the calls :func:`kept_calls` leaves out; runs keep their place."""
    if len(columns.codes) == 0:
        return columns
    codes = [i for i, n in enumerate(columns.names) if n in drop]
    keep = np.ones(len(columns.codes), dtype=bool)
    if codes:
        keep &= ~np.isin(columns.codes, np.asarray(codes, dtype=np.int64))
    keep &= ~_retried(columns)
    if keep.all():
        return columns
    kept_before = np.concatenate([np.zeros(1, np.int64), np.cumsum(keep, dtype=np.int64)])
    return replace(
        columns,
        codes=columns.codes[keep],
        errors=columns.errors[keep],
        offsets=kept_before[columns.offsets],
    )


def _retried(columns: Any) -> npt.NDArray[np.bool_]:
    """Per call, True for a failed call whose tool its run calls again later. Only the runs
    holding a failed call are looked at, in one sort: a call is retried when it is not the
    last of its (run, tool) group."""
    retried = np.zeros(len(columns.codes), dtype=bool)
    failed = np.flatnonzero(columns.errors)
    if failed.size == 0:
        return retried
    offsets = columns.offsets
    runs = np.unique(np.searchsorted(offsets, failed, side="right") - 1)
    starts, lens = offsets[runs], offsets[runs + 1] - offsets[runs]
    total = int(lens.sum())
    first = np.concatenate([np.zeros(1, np.int64), np.cumsum(lens)[:-1]])
    pos = np.repeat(starts - first, lens) + np.arange(total, dtype=np.int64)
    key = np.repeat(np.arange(len(runs), dtype=np.int64), lens) * (len(columns.names) + 1)
    key += columns.codes[pos]
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    last = np.empty(total, dtype=bool)
    last[order] = np.concatenate([ordered[1:] != ordered[:-1], np.ones(1, dtype=bool)])
    retried[pos] = columns.errors[pos] & ~last
    return retried


def replay_key(task: str | None, args: Sequence[Any]) -> str | None:
    """What makes two occurrences of a pattern the same piece of evidence: the task text and
    the argument values of the pattern's calls; None (every occurrence its own) when the run
    records no task text."""
    if not task:
        return None
    return task + "\x1f" + canonical_json(list(args))
