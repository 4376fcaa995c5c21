"""The design document's Flow Sequence Detector, written straightforwardly: the baseline.

What the document describes (``/work/shared/seeds/000_*.txt``, "Detection Algorithm"),
as a competent first pass would write it, with dicts keyed by tuples of tool names:

1. every run's tool names as a tuple;
2. **exact match**: identical whole sequences (length ≥ ``min_sequence_length``) in
   ≥ ``min_occurrences`` distinct runs;
3. **subsequence match**: contiguous sub-sequences of length ≥ ``min_sequence_length``
   inside longer sequences, in ≥ ``min_occurrences`` distinct runs, promoted only when not
   covered by (a contiguous part of) an exact-match candidate;
4. each candidate's savings = average run cost × occurrences × 0.95 (the run's tokens when
   no cost is recorded, as the project's detector does, else 0); the
   ``max_candidates`` best are returned.

One deliberate difference from the document: it reads the **whole ledger**, not the newest
200 learning records, so that it sees the same runs as the miner it is compared with.

Only the standard library is used, so the benchmark's baseline process imports nothing of
SoloFlow (its memory is its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

SAVINGS_FACTOR = 0.95


class RunLike(Protocol):
    """What the detector reads of a run."""

    @property
    def names(self) -> Sequence[str]: ...

    @property
    def cost(self) -> float | None: ...

    @property
    def tokens(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class DocCandidate:
    """One flow candidate, with the fields the design document's candidate has."""

    tool_sequence: tuple[str, ...]
    occurrence_count: int
    """Distinct runs the sequence was found in."""
    match_type: str
    """``"exact"`` or ``"subsequence"``."""
    avg_cost_per_execution: float
    estimated_token_savings: float


def detect_doc_candidates(
    runs: Sequence[RunLike],
    *,
    min_sequence_length: int = 3,
    min_occurrences: int = 3,
    max_candidates: int = 5,
) -> list[DocCandidate]:
    """The design document's candidates for ``runs``, best savings first.

    Example:
        >>> from types import SimpleNamespace as R
        >>> runs = [R(names=("a", "b", "c"), cost=1.0, tokens=None)] * 3
        >>> [(c.tool_sequence, c.match_type) for c in detect_doc_candidates(runs)]
        [(('a', 'b', 'c'), 'exact')]
    """
    exact: dict[tuple[str, ...], list[int]] = {}
    within: dict[tuple[str, ...], list[int]] = {}
    for i, run in enumerate(runs):
        seq = tuple(run.names)
        n = len(seq)
        if n < min_sequence_length:
            continue
        exact.setdefault(seq, []).append(i)
        # A run counts once per sub-sequence, however often the sub-sequence repeats in it.
        seen = {
            seq[start : start + length]
            for length in range(min_sequence_length, n)
            for start in range(n - length + 1)
        }
        for sub in seen:
            within.setdefault(sub, []).append(i)

    candidates: list[DocCandidate] = []
    covered: set[tuple[str, ...]] = set()
    for seq, found in exact.items():
        if len(found) >= min_occurrences:
            candidates.append(_candidate(seq, found, "exact", runs))
            covered.update(_windows(seq, min_sequence_length))
    for sub, found in within.items():
        if len(found) >= min_occurrences and sub not in covered:
            candidates.append(_candidate(sub, found, "subsequence", runs))
    # The sequence itself breaks the last ties: set order varies with the string hash seed.
    candidates.sort(
        key=lambda c: (
            -c.estimated_token_savings,
            -c.occurrence_count,
            -len(c.tool_sequence),
            c.tool_sequence,
        )
    )
    return candidates[:max_candidates]


def _windows(seq: tuple[str, ...], min_length: int) -> Iterable[tuple[str, ...]]:
    """Every contiguous part of ``seq`` at least ``min_length`` long, ``seq`` included."""
    n = len(seq)
    for length in range(min_length, n + 1):
        for start in range(n - length + 1):
            yield seq[start : start + length]


def _candidate(
    seq: tuple[str, ...], found: list[int], match_type: str, runs: Sequence[RunLike]
) -> DocCandidate:
    costs = [c for i in found if (c := runs[i].cost) is not None]
    if not costs:
        costs = [t for i in found if (t := runs[i].tokens) is not None]
    avg = sum(costs) / len(costs) if costs else 0.0
    return DocCandidate(
        tool_sequence=seq,
        occurrence_count=len(found),
        match_type=match_type,
        avg_cost_per_execution=avg,
        estimated_token_savings=avg * len(found) * SAVINGS_FACTOR,
    )
