"""Ranking mined patterns by how much of the ledger they explain, tolerating agent noise.

Counting a pattern's support and multiplying by a run's cost ranks 3-call fragments of common
workflows above the workflows, and chance sequences of popular tools above both. Here the
ranking picks the set of patterns that best *compresses* the ledger (the MDL idea of SQS and
GoKrimp), greedily. This module ranks runs end to end; the stages live in:

* :mod:`~soloflow_core.mining.units`: runs as units (a retried call, and by default a loop,
  is one unit; failed runs are left out unless ``include_failed_runs``).
* :mod:`~soloflow_core.mining.matching`: noise-tolerant occurrences (a stray call between two
  steps, two adjacent steps swapped, or cut short by a failing call), matched for many
  candidates in one array pass.
* :mod:`~soloflow_core.mining.cover`: the bits a pattern saves encoding the ledger, and the
  greedy cover that takes the best pattern, marks its units covered and drops fragments of
  the chosen ones (on a sample of a ledger too big to cover whole, then replayed on all).
* :mod:`~soloflow_core.mining.results`: what a chosen pattern reports, and what it saves.
* :mod:`~soloflow_core.mining.options`: :class:`RankingOptions` and what the others share.

What a flow saves per occurrence is the model turns behind its calls (but the one that calls
the flow) and their tokens: measured from the runs' model calls (usage_metadata) where they
are aligned to tool calls, else each run's token total spread over its turns, else
:data:`DEFAULT_TOKENS_PER_STEP` per saved call. ``savings_method`` says which;
:func:`with_measured_savings` measures it afresh from the full runs.

Example:
    >>> ranked = rank_runs(task_runs, top_k=5)
    >>> [(r.names, r.estimated_token_savings) for r in ranked]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from soloflow_core.mining.closed import mine_closed_patterns
from soloflow_core.mining.cover import rank_patterns
from soloflow_core.mining.options import HasNames, RankingOptions
from soloflow_core.mining.results import RankedPattern
from soloflow_core.mining.units import align_turns, prepare_ledger

if TYPE_CHECKING:
    from soloflow_core.models import TaskRun

__all__ = ["rank_runs", "with_measured_savings"]


def with_measured_savings(
    ranked: RankedPattern, runs: Mapping[int, TaskRun] | Sequence[TaskRun]
) -> RankedPattern:
    """``ranked`` with savings measured from full runs (keyed by input index), e.g. when it
    was ranked from name-only sequences and the runs behind its occurrences were loaded."""
    saved_tokens: list[float] = []
    saved_turns: list[float] = []
    for occ in ranked.occurrences:
        try:
            run = runs[occ.run]
        except (KeyError, IndexError):
            continue
        aligned = align_turns(run.model_calls, len(run.tool_calls))
        if aligned is None:
            continue
        tok, turn = aligned
        calls = [i for span in occ.spans if span for i in range(span[0], span[1] + 1)]
        t = sum(tok[i] for i in calls)
        k = sum(turn[i] for i in calls)
        if k > 0:
            saved_tokens.append(t * (k - 1) / k)
            saved_turns.append(max(k - 1, 0.0))
    if not saved_tokens:
        return ranked
    per_tok = sum(saved_tokens) / len(saved_tokens)
    return replace(
        ranked,
        tokens_saved_per_occurrence=per_tok,
        turns_saved_per_occurrence=sum(saved_turns) / len(saved_turns),
        estimated_token_savings=per_tok * len(ranked.occurrences),
        savings_method=f"measured: tokens of the model turns that requested the pattern's calls "
        f"(usage_metadata), in {len(saved_tokens)} of {len(ranked.occurrences)} occurrences; all "
        "turns but the one that calls the flow are saved",
    )


def rank_runs(
    runs: Iterable[Any],
    *,
    top_k: int = 5,
    min_length: int = 3,
    min_support: int = 3,
    options: RankingOptions | None = None,
    miner: Callable[..., Sequence[HasNames]] | None = None,
) -> list[RankedPattern]:
    """Units → closed patterns (``miner``, default :func:`mine_closed_patterns`) → ranking."""
    ledger = prepare_ledger(runs, options)
    if ledger.unit_count == 0:
        return []
    mine = miner or mine_closed_patterns
    patterns = mine(ledger.sequences, min_length=min_length, min_support=min_support)
    return rank_patterns(ledger, patterns, top_k=top_k, min_support=min_support)
