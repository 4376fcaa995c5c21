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
        >>> runs = [TaskRun(run_id="r", tool_calls=[ToolCall(name="think", args=note, output=""),
        ...                                         ToolCall(name="book", args={"id": "F1"})])] * 3
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
    dropped = np.zeros(len(columns.names) + 1, dtype=bool)
    dropped[[i for i, n in enumerate(columns.names) if n in drop]] = True
    gone = _retried(columns)
    if dropped.any():
        gone |= dropped[columns.codes]
    removed = np.flatnonzero(gone)
    if removed.size == 0:
        return columns
    return replace(
        columns,
        codes=np.delete(columns.codes, removed),
        errors=np.delete(columns.errors, removed),
        offsets=columns.offsets - np.searchsorted(removed, columns.offsets),
    )


def _retried(columns: Any) -> npt.NDArray[np.bool_]:
    """Per call, True for a failed call whose tool its run calls again later: each failed
    call's tool compared with the calls after it in its run, all at once."""
    retried = np.zeros(len(columns.codes), dtype=bool)
    failed = np.flatnonzero(columns.errors)
    if failed.size == 0:
        return retried
    ends = columns.offsets[np.searchsorted(columns.offsets, failed, side="right")]
    lens = ends - failed - 1
    failed, lens = failed[lens > 0], lens[lens > 0]
    if failed.size == 0:
        return retried
    seg = np.concatenate([np.zeros(1, np.int64), np.cumsum(lens)[:-1]])
    after = np.repeat(failed + 1 - seg, lens) + np.arange(int(lens.sum()), dtype=np.int64)
    same = columns.codes.take(after) == np.repeat(columns.codes.take(failed), lens)
    retried[failed] = np.add.reduceat(same, seg) > 0
    return retried


def replay_key(task: str | None, args: Sequence[Any]) -> str | None:
    """What makes two occurrences of a pattern the same piece of evidence: the task text and
    the argument values of the pattern's calls; None (every occurrence its own) when the run
    records no task text."""
    if not task:
        return None
    return task + "\x1f" + canonical_json(list(args))
