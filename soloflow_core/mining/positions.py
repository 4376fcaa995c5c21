"""Where patterns may start in a flat code array too big for :class:`~soloflow_core.mining.matching.ChainIndex`.

:func:`positions` picks the index: :class:`PairPositions` reads a pattern's possible starts off
the instances of its first pair; beyond :data:`PAIR_POSITIONS_LIMIT` slots,
:class:`CodePositions` scans from the places of its rarer first step (:func:`scan_starts_many`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from soloflow_core.mining._packing import distinct_values, pair_keys, sorted_pairs
from soloflow_core.mining.options import IntArray

if TYPE_CHECKING:
    from soloflow_core.mining.options import RankingOptions

__all__ = ["PAIR_POSITIONS_LIMIT", "CodePositions", "PairPositions", "positions"]


class CodePositions:
    """Where each code sits in a flat code array, for ledgers too big to index by pairs: one
    packed sort, then each code's positions (ascending) are a slice."""

    def __init__(self, code: IntArray) -> None:
        at = np.flatnonzero(code >= 0)
        bits = max(len(code).bit_length(), 1)
        packed = code[at].astype(np.int64)
        packed <<= bits
        packed |= at
        del at
        packed.sort()
        # Both halves in the code array's own type (int32 below 2**31 units: half the memory).
        small = code.dtype if bits <= 31 else np.dtype(np.int64)
        self.pos = packed.astype(small)  # the low bits: the position, once masked
        self.pos &= (1 << bits) - 1
        packed >>= bits
        self.code = packed.astype(small)

    def keys(self, codes: IntArray | list[int]) -> IntArray:
        """``codes`` in the type of :attr:`code`, so that a search does not convert it."""
        return np.asarray(codes, dtype=self.code.dtype)

    def of(self, c: int) -> IntArray:
        lo, hi = np.searchsorted(self.code, self.keys([c, c + 1]))
        return self.pos[lo:hi]

    def starts_many(
        self, work: IntArray, pats: Sequence[IntArray], opt: RankingOptions
    ) -> tuple[IntArray, IntArray]:
        return scan_starts_many(work, pats, opt, where=self)

    def starts(self, work: IntArray, pat: IntArray, opt: RankingOptions) -> IntArray:
        return scan_starts(work, pat, opt, where=self)

    def candidates(self, pat: IntArray) -> IntArray:
        """Where an exact occurrence of ``pat`` may start (a superset): from the places of
        its rarest step, the fewest to check."""
        lo = np.searchsorted(self.code, self.keys(pat))
        hi = np.searchsorted(self.code, self.keys(pat + 1))
        o = int(np.argmin(hi - lo))
        return self.pos[lo[o] : hi[o]].astype(np.int64) - o


class PairPositions:
    """Where each pair of units sits in a flat code array, adjacent and one apart (whatever
    is between): a pattern's possible starts are read off its first pair's instances, not
    checked at every place of one of its tools (:class:`CodePositions`). About four times
    the memory of :class:`CodePositions`: for ledgers below :data:`PAIR_POSITIONS_LIMIT`
    slots."""

    def __init__(self, code: IntArray) -> None:
        self.width = w = int(code.max()) + 1 if len(code) and code.max() >= 0 else 1
        a, b, c = code[:-2], code[1:-1], code[2:]
        packable = (w * w).bit_length() + max(len(code).bit_length(), 1) < 63
        at = np.flatnonzero((a >= 0) & (b >= 0))
        self.adj = sorted_pairs(pair_keys(a, b, at, w=w), at, packable, reuse=True, small=True)
        at = np.flatnonzero((a >= 0) & (c >= 0))
        self.skip = sorted_pairs(pair_keys(a, c, at, w=w), at, packable, reuse=True, small=True)

    def starts_many(
        self, work: IntArray, pats: Sequence[IntArray], opt: RankingOptions
    ) -> tuple[IntArray, IntArray]:
        """What :func:`scan_starts_many` finds: (start, pattern index), sorted by both."""
        heads = np.asarray([p[:2] for p in pats], dtype=np.int64).reshape(-1, 2)
        a, b, w = heads[:, 0], heads[:, 1], self.width
        forms = [(self.adj, a, b, 1)]  # a, then b next
        if opt.max_gap or opt.max_swaps:  # ... or one unit later
            forms.append((self.skip, a, b, 2))
        if opt.max_swaps:  # b, then a: the occurrence starts at b
            forms.append((self.adj, b, a, 1))
        found = []
        for (keys, at), x, y, gap in forms:
            lo = np.searchsorted(keys, x * w + y, side="left")
            count = np.searchsorted(keys, x * w + y, side="right") - lo
            start = at[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())]
            who = np.repeat(np.arange(len(pats)), count)
            hit = np.flatnonzero((work[start] == x[who]) & (work[start + gap] == y[who]))
            found.append((who[hit] << _SHIFT) | start[hit])  # none of their units covered
        packed = np.sort(np.concatenate(found))
        packed = (
            packed[np.concatenate(([True], packed[1:] != packed[:-1]))] if len(packed) else packed
        )
        return packed & ((1 << _SHIFT) - 1), packed >> _SHIFT

    def starts(self, work: IntArray, pat: IntArray, opt: RankingOptions) -> IntArray:
        return self.starts_many(work, [pat], opt)[0]

    def candidates(self, pat: IntArray) -> IntArray:
        """Where an exact occurrence of ``pat`` may start (a superset): from the instances
        of its rarest adjacent pair."""
        keys, at = self.adj
        pairs = pat[:-1].astype(np.int64) * self.width + pat[1:]
        lo = np.searchsorted(keys, pairs, side="left")
        hi = np.searchsorted(keys, pairs, side="right")
        o = int(np.argmin(hi - lo))
        return at[lo[o] : hi[o]] - o


PAIR_POSITIONS_LIMIT = 2**22
"""Flat slots (units and separators) below which :func:`positions` indexes pairs."""


def positions(code: IntArray) -> CodePositions | PairPositions:
    """The index that finds patterns' starts in ``code``: by pairs, or on a ledger too big
    for that (~35 MB per million slots), by codes (~8 MB per million)."""
    return PairPositions(code) if len(code) < PAIR_POSITIONS_LIMIT else CodePositions(code)


def scan_starts(
    work: IntArray, pat: IntArray, opt: RankingOptions, *, where: CodePositions
) -> IntArray:
    """Every free place a tolerant occurrence of ``pat`` can start (a superset)."""
    a, b = int(pat[0]), int(pat[1])
    at = where.of(a)
    ok = work[at + 1] == b
    if opt.max_gap or opt.max_swaps:  # a stray between, or the next two steps swapped
        ok |= work[at + 2] == b
    found = at[ok & (work[at] == a)]
    if opt.max_swaps:
        at = where.of(b)
        found = distinct_values(np.concatenate((found, at[(work[at + 1] == a) & (work[at] == b)])))
    return cast("IntArray", found)


def scan_starts_many(
    work: IntArray, pats: Sequence[IntArray], opt: RankingOptions, *, where: CodePositions
) -> tuple[IntArray, IntArray]:
    """:func:`scan_starts` of several patterns: (start, pattern index), sorted by both.

    Each pattern's first two steps ``a, b`` are found from the positions of the rarer of
    the two: ``a`` then ``b`` one or two later, or ``b`` then ``a`` (swapped)."""
    heads = np.asarray([p[:2] for p in pats], dtype=np.int64)
    lo = np.searchsorted(where.code, where.keys(heads))
    count = np.searchsorted(where.code, where.keys(heads + 1)) - lo
    by_b = count[:, 1] < count[:, 0]  # look the pair up from its second step
    pick = np.where(by_b, 1, 0)
    rows = np.arange(len(pats))
    lo, count = lo[rows, pick], count[rows, pick]
    at = where.pos[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())]
    who = np.repeat(rows, count)
    a, b, from_b = heads[who, 0], heads[who, 1], by_b[who]
    found = []
    # a, then b next or one unit later (a stray between, or b swapped with the step after)
    for gap in (1, 2) if opt.max_gap or opt.max_swaps else (1,):
        start = np.where(from_b, at - gap, at)
        ok = (work[start] == a) & (work[start + gap] == b)
        found.append((who[ok] << _SHIFT) | start[ok])
    if opt.max_swaps:  # b, then a: the occurrence starts at b
        start = np.where(from_b, at, at - 1)
        ok = (work[start] == b) & (work[start + 1] == a)
        found.append((who[ok] << _SHIFT) | start[ok])
    packed = np.sort(np.concatenate(found))
    packed = packed[np.concatenate(([True], packed[1:] != packed[:-1]))] if len(packed) else packed
    return packed & ((1 << _SHIFT) - 1), packed >> _SHIFT


_SHIFT = 40
"""Bits of a flat position in a packed (pattern, position) key."""
