"""The closed contiguous-pattern miner on numpy arrays: near-linear in the ledger's size.

The ledger is one array of integer tool codes (all runs concatenated) plus run offsets.
Patterns grow level by level; at level *k* every surviving position carries the dense id of
the *k*-gram that starts there, and the (*k*+1)-gram id is the rank of the pair
(*k*-gram id, next code). Only frequent grams survive (support can only shrink as a
pattern grows), so the work per level is the number of positions still inside a frequent
gram. Support is the number of distinct runs, counted with one sort per level.

A *k*-gram is closed when no frequent (*k*+1)-gram with the same support extends it to the
right (same prefix id) or to the left (same suffix id); both are read off level *k*+1.

Results are compact (names, support, exact support); where a pattern occurs is computed on
demand for the few patterns that need it (:meth:`CodedLedger.occurrences`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from soloflow_core.mining.closed import Pattern

DEFAULT_MAX_LENGTH = 64

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MinedPattern:
    """A closed frequent pattern, without its occurrence lists."""

    codes: tuple[int, ...]
    names: tuple[str, ...]
    support: int
    """Distinct runs containing it."""
    exact_support: int
    """Runs whose whole sequence is exactly this pattern."""
    truncated: bool = False
    """True when it reached ``max_length`` and may continue further."""


@dataclass(slots=True)
class CodedLedger:
    """Runs as integer codes: ``codes[offsets[r]:offsets[r + 1]]`` is run ``r``."""

    codes: IntArray
    offsets: IntArray
    names: list[str]

    @classmethod
    def from_sequences(cls, sequences: Sequence[Sequence[str]]) -> CodedLedger:
        vocab: dict[str, int] = {}
        flat: list[int] = []
        offsets = [0]
        for seq in sequences:
            flat.extend(vocab.setdefault(n, len(vocab)) for n in seq)
            offsets.append(len(flat))
        return cls(np.asarray(flat, dtype=np.int64), np.asarray(offsets, dtype=np.int64), list(vocab))

    @property
    def run_count(self) -> int:
        return len(self.offsets) - 1

    def run_ids(self) -> IntArray:
        lengths = np.diff(self.offsets)
        return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)

    def sequence(self, run: int) -> tuple[str, ...]:
        return tuple(self.names[c] for c in self.codes[self.offsets[run] : self.offsets[run + 1]])

    def occurrences(self, codes: Sequence[int]) -> tuple[IntArray, IntArray]:
        """Where a pattern occurs: (runs ascending, first start position in each run)."""
        k = len(codes)
        n = len(self.codes)
        if k == 0 or k > n:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        starts = np.flatnonzero(self.codes[: n - k + 1] == codes[0])
        for i in range(1, k):
            starts = starts[self.codes[starts + i] == codes[i]]
        run_of = np.searchsorted(self.offsets, starts, side="right") - 1
        fits = starts + k <= self.offsets[run_of + 1]
        starts, run_of = starts[fits], run_of[fits]
        runs, first = np.unique(run_of, return_index=True)
        return runs, starts[first] - self.offsets[runs]


def _group(key: IntArray, rid: IntArray) -> tuple[IntArray, IntArray]:
    """Dense ids for ``key`` (one per distinct value) and each id's distinct-run support.

    ``rid`` must be non-decreasing along the array (positions in ledger order): a stable
    sort by key then leaves each key's runs in order, so distinct runs are counted by
    comparing neighbours — one sort per level, no hashing.
    """
    order = np.argsort(key, kind="stable")
    ks = key[order]
    start = np.empty(len(ks), dtype=bool)
    start[:1] = True
    np.not_equal(ks[1:], ks[:-1], out=start[1:])
    gid_sorted = np.cumsum(start) - 1
    gid = np.empty_like(gid_sorted)
    gid[order] = gid_sorted
    rs = rid[order]
    new_run = start.copy()
    new_run[1:] |= rs[1:] != rs[:-1]
    n = int(gid_sorted[-1]) + 1 if len(gid_sorted) else 0
    return gid, np.bincount(gid_sorted[new_run], minlength=n)


def _representatives(gid: IntArray, pos: IntArray, n: int) -> IntArray:
    """One position per gram id (any occurrence will do: all share the gram's codes)."""
    rep = np.empty(n, dtype=np.int64)
    rep[gid] = pos
    return rep


def _keep(gid: IntArray, sup: IntArray, mask: npt.NDArray[np.bool_]) -> tuple[IntArray, IntArray]:
    """Re-densify the gram ids of the positions kept by ``mask``."""
    kept = np.zeros(len(sup), dtype=bool)
    kept[gid[mask]] = True
    remap = np.cumsum(kept) - 1
    return remap[gid[mask]], sup[kept]


def mine_coded(
    ledger: CodedLedger,
    *,
    min_length: int = 3,
    min_support: int = 3,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> list[MinedPattern]:
    """Closed patterns of length ``min_length``..``max_length`` in ≥ ``min_support`` runs.

    Sorted longest first, then by support (descending), then by names.
    """
    if min_length < 1 or min_support < 1 or max_length < min_length:
        raise ValueError("need 1 ≤ min_length ≤ max_length and min_support ≥ 1")
    codes = ledger.codes
    n_runs = ledger.run_count
    if len(codes) == 0 or n_runs < min_support:
        return []
    rid = ledger.run_ids()
    run_end = ledger.offsets[1:][rid]
    vocab = max(len(ledger.names), int(codes.max()) + 1)
    lengths = np.diff(ledger.offsets)

    gid, sup = _group(codes, rid)
    alive = sup[gid] >= min_support
    pos = np.flatnonzero(alive).astype(np.int64)
    gid, sup = _keep(gid, sup, alive)
    k = 1
    out: list[MinedPattern] = []
    while len(pos):
        # Extend every surviving k-gram by the code that follows it in its run.
        room = pos + k < run_end[pos]
        p_next = pos[room]
        new_gid, new_sup = _group(gid[room] * vocab + codes[p_next + k], rid[p_next])
        frequent = new_sup[new_gid] >= min_support
        if k >= min_length:
            closed = np.ones(len(sup), dtype=bool)
            # At the length cap every extension is out of reach: report what is there.
            if k < max_length and frequent.any():
                rep = _representatives(new_gid[frequent], p_next[frequent], len(new_sup))
                grams = np.flatnonzero(new_sup >= min_support)
                at = np.searchsorted(pos, rep[grams])
                prefix = gid[at]
                suffix = gid[np.searchsorted(pos, rep[grams] + 1)]
                s = new_sup[grams]
                closed[prefix[s == sup[prefix]]] = False
                closed[suffix[s == sup[suffix]]] = False
            out.extend(_emit(ledger, pos, gid, sup, closed, k, rid, lengths, truncated=k == max_length))
        if k == max_length:
            break
        pos = p_next[frequent]
        gid, sup = _keep(new_gid, new_sup, frequent)
        k += 1
    out.sort(key=lambda p: (-len(p.codes), -p.support, p.names))
    return out


def _emit(
    ledger: CodedLedger,
    pos: IntArray,
    gid: IntArray,
    sup: IntArray,
    closed: npt.NDArray[np.bool_],
    k: int,
    rid: IntArray,
    lengths: IntArray,
    *,
    truncated: bool,
) -> list[MinedPattern]:
    wanted = np.flatnonzero(closed)
    if len(wanted) == 0:
        return []
    rep = _representatives(gid, pos, len(sup))
    exact_mask = (lengths[rid[pos]] == k) & (pos == ledger.offsets[rid[pos]])
    exact = np.bincount(gid[exact_mask], minlength=len(sup))
    window = ledger.codes[rep[wanted][:, None] + np.arange(k)]
    out = []
    for g, row in zip(wanted.tolist(), window.tolist(), strict=True):
        cs = tuple(row)
        out.append(
            MinedPattern(
                codes=cs,
                names=tuple(ledger.names[c] for c in cs),
                support=int(sup[g]),
                exact_support=int(exact[g]),
                truncated=truncated,
            )
        )
    return out


def mine_closed_patterns_fast(
    sequences: Sequence[Sequence[str]] | CodedLedger,
    *,
    min_length: int = 3,
    min_support: int = 3,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> list[Pattern]:
    """:func:`soloflow_core.mining.closed.mine_closed_patterns` with occurrence lists, fast."""
    ledger = sequences if isinstance(sequences, CodedLedger) else CodedLedger.from_sequences(sequences)
    out = []
    for p in mine_coded(ledger, min_length=min_length, min_support=min_support, max_length=max_length):
        runs, firsts = ledger.occurrences(p.codes)
        lengths = np.diff(ledger.offsets)[runs]
        exact = runs[(lengths == len(p.codes)) & (firsts == 0)]
        out.append(
            Pattern(
                names=p.names,
                runs=tuple(int(r) for r in runs),
                exact_runs=tuple(int(r) for r in exact),
                first_positions=tuple(int(f) for f in firsts),
            )
        )
    return out
