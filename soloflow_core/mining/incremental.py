"""Incremental detection: "is there a new candidate?" after each run, in O(run length).

Per namespace, the detector keeps the distinct-run support of every contiguous n-gram
(``min_length`` ≤ n ≤ ``max_length``) it has seen. Adding a run updates the counts of
that run's grams only — O(run length × max_length), a constant factor — and reports the
grams that just became frequent or grew and are not yet known as a candidate or a flow.
Full, ranked mining (:func:`soloflow_core.mining.detector.detect_candidates`) runs only
then, or on demand.

It counts the same units the full detector mines (:func:`unit_names`: a tool called several
times in a row — a retry or a loop — is one unit), so a workflow with a loop of one item and
one of four counts as one gram. Noise the full ranking tolerates (a stray call, a swapped
pair) is not: such a gram triggers detection once its clean occurrences are frequent, and the
full detection then credits the noisy ones too.

Memory is bounded: past ``max_entries`` grams, the ones seen in a single run are dropped
(they are re-counted from the store by the next full detection).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from soloflow_core.models import dedupe_key_for


def unit_names(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` with each run of the same tool called several times in a row kept once.

    >>> unit_names(["a", "b", "b", "b", "c"])
    ('a', 'b', 'c')
    """
    return tuple(n for i, n in enumerate(names) if i == 0 or names[i - 1] != n)


@dataclass(slots=True)
class NamespaceState:
    support: dict[tuple[str, ...], int] = field(default_factory=dict)
    known_keys: set[str] = field(default_factory=set)
    runs_seen: int = 0


class IncrementalDetector:
    """Gram supports per (user, agent); thread-safe."""

    def __init__(
        self,
        *,
        min_length: int = 3,
        min_occurrences: int = 3,
        max_length: int = 12,
        max_entries: int = 2_000_000,
    ) -> None:
        self.min_length = min_length
        self.min_occurrences = min_occurrences
        self.max_length = max(max_length, min_length)
        self.max_entries = max_entries
        self._states: dict[tuple[str, str], NamespaceState] = {}
        self._lock = threading.Lock()

    def is_warm(self, user_id: str, agent_id: str) -> bool:
        return (user_id, agent_id) in self._states

    def warm(
        self,
        user_id: str,
        agent_id: str,
        sequences: Iterable[Sequence[str]],
        known_keys: Iterable[str] = (),
    ) -> None:
        """Load a namespace's existing ledger (once, e.g. from ``Store.iter_sequences``)."""
        state = NamespaceState(known_keys=set(known_keys))
        for seq in sequences:
            self._count(state, seq)
        with self._lock:
            self._states[(user_id, agent_id)] = state

    def mark_known(self, user_id: str, agent_id: str, keys: Iterable[str]) -> None:
        """Dedupe keys now proposed, decided or registered: not reported again."""
        with self._lock:
            self._states.setdefault((user_id, agent_id), NamespaceState()).known_keys.update(keys)

    def add_run(self, user_id: str, agent_id: str, names: Sequence[str]) -> list[tuple[str, ...]]:
        """Count one run; return its grams that are frequent and not known yet, longest first.

        Grams contained in a longer returned gram with the same support are left out.
        """
        with self._lock:
            state = self._states.setdefault((user_id, agent_id), NamespaceState())
            grams = self._count(state, names)
            frequent = [g for g in grams if state.support[g] >= self.min_occurrences]
            support = {g: state.support[g] for g in frequent}
            known = {g for g in frequent if dedupe_key_for(g) in state.known_keys}
            if len(state.support) > self.max_entries:
                state.support = {g: c for g, c in state.support.items() if c > 1}
        frequent.sort(key=lambda g: (-len(g), g))
        kept: list[tuple[str, ...]] = []  # closed within this run's grams
        for g in frequent:
            if not any(support[b] == support[g] and _contains(b, g) for b in kept):
                kept.append(g)
        return [g for g in kept if g not in known]

    def _count(self, state: NamespaceState, names: Sequence[str]) -> set[tuple[str, ...]]:
        seq = unit_names(names)
        grams = {
            seq[i : i + n]
            for n in range(self.min_length, min(self.max_length, len(seq)) + 1)
            for i in range(len(seq) - n + 1)
        }
        sup = state.support
        for g in grams:
            sup[g] = sup.get(g, 0) + 1
        state.runs_seen += 1
        return grams


def _contains(big: tuple[str, ...], small: tuple[str, ...]) -> bool:
    n = len(small)
    return any(big[i : i + n] == small for i in range(len(big) - n + 1))
